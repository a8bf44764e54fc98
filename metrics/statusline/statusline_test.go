package statusline_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

func TestComposeMatchesDesignExample(t *testing.T) {
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateOK])
	want := []statusline.Part{{Text: "memd: "}, {Text: "+2 ~1", Kind: statusline.KindOK}, {Text: " · 14:32", Kind: statusline.KindDim}}
	if d.Summary.Text != "memd: +2 ~1 · 14:32" || !reflect.DeepEqual(d.Summary.Parts, want) {
		t.Fatalf("summary = %+v", d.Summary)
	}
	if d.State != statusline.StateOK || d.Version != 1 || d.PID != 4242 || d.Detail != "committed 3 files, pushed to origin/main" {
		t.Fatalf("doc = %+v", d)
	}
	s := d.Sections[0]
	if s.Consumer != "memd" || s.Key != "sync" || s.Until != "session" || s.Order != 20 || s.Lines[0].Text != "+2 ~1 · 14:32" || s.Lines[1].Kind != statusline.KindDim {
		t.Fatalf("section = %+v", s)
	}
	// JSON field names and order are the contract.
	b, _ := json.Marshal(d)
	keys := []string{`"version":1,"updated_at":"2026-11-30T14:32:05Z","pid":4242,"repo":`, `"state":"ok","summary":{"text":"memd: +2 ~1 · 14:32","parts":[{"text":"memd: "},{"text":"+2 ~1","kind":"ok"},{"text":" · 14:32","kind":"dim"}]},"detail":`,
		`"ahead":0,"behind":0,"pending":0,"inbox":7,"warnings":[],"error":"","last_commit":{"at":`, `"last_push":`, `"last_sleep":{"at":`, `"sections":[{"consumer":"memd","key":"sync","title":"memory repo","until":"session","order":20,"lines":[`}
	for _, k := range keys {
		if !strings.Contains(string(b), k) {
			t.Errorf("json lacks %s\n%s", k, b)
		}
	}
}

func TestComposeStates(t *testing.T) {
	for state, f := range statuslinetest.Fixtures() {
		if got := statusline.Compose(f).State; got != state {
			t.Errorf("fixture %s composes state %s", state, got)
		}
	}
	// The error front is red, the message default colour (seed: errorParts).
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateError])
	if p := d.Summary.Parts; p[1] != (statusline.Part{Text: "error:", Kind: statusline.KindError}) || p[2].Kind != statusline.KindNone || !strings.HasPrefix(p[2].Text, " push origin/main") {
		t.Errorf("error parts = %+v", p)
	}
	// Busy is faint with an ellipsis and takes precedence over an old error.
	f := statuslinetest.Fixtures()[statusline.StateError]
	f.Busy, f.Detail = true, "syncing"
	if d := statusline.Compose(f); d.State != statusline.StateBusy || d.Summary.Parts[1] != (statusline.Part{Text: "syncing…", Kind: statusline.KindDim}) {
		t.Errorf("busy = %+v", d.Summary)
	}
	// No commit yet reads "no change", faint.
	f = statuslinetest.Fixtures()[statusline.StateOK]
	f.LastCommit, f.LastPush = nil, nil
	if d := statusline.Compose(f); d.Summary.Text != "memd: no change · 14:32" || d.Summary.Parts[1].Kind != statusline.KindDim || d.Detail != "nothing committed yet" {
		t.Errorf("no change = %+v %q", d.Summary, d.Detail)
	}
	// Thresholds: at 20 no warning, at 21 one.
	f = statuslinetest.Fixtures()[statusline.StateOK]
	f.Inbox = 20
	if d := statusline.Compose(f); d.State != statusline.StateOK || len(d.Warnings) != 0 {
		t.Errorf("inbox 20 warns: %v", d.Warnings)
	}
	f.Inbox = 21
	if d := statusline.Compose(f); d.State != statusline.StateWarn || d.Warnings[0] != "inbox 21 (over 20)" || !strings.Contains(d.Summary.Text, "inbox 21") {
		t.Errorf("inbox 21: %v %q", d.Warnings, d.Summary.Text)
	}
}

func TestComposeCleansControlCharacters(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateError]
	f.Error = "bad\nthing\x1b[31m here\r"
	d := statusline.Compose(f)
	if strings.ContainsAny(d.Summary.Text, "\n\r\x1b") || d.Error != `bad\nthing\x1b[31m here\r` {
		t.Fatalf("not cleaned: %q / %q", d.Summary.Text, d.Error)
	}
	// A hand-written document with control characters still renders one line.
	d.Summary.Parts[2].Text = "x\ny"
	for _, f := range statusline.LineFormats {
		out, err := statusline.Render(&d, f, statuslinetest.Now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if f != "i3blocks" && f != "swiftbar" && strings.Contains(out, "\n") {
			t.Errorf("%s: %q has a newline", f, out)
		}
	}
}

func TestWriteRead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo", ".git", "memd")
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateWarn])
	if err := statusline.Write(dir, d); err != nil {
		t.Fatal(err)
	}
	got, err := statusline.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, d) {
		t.Fatalf("read back differs:\n%+v\n%+v", *got, d)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", fi.Mode().Perm())
	}
	for _, f := range append([]string{"json"}, statusline.LineFormats...) {
		p := filepath.Join(dir, "status."+f)
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v", p, fi.Mode().Perm())
		}
		// The fast path of memd status trusts a line file only when its mtime, status.json's
		// and updated_at agree.
		if !fi.ModTime().Equal(d.UpdatedAt) {
			t.Errorf("%s mtime %v, want updated_at %v", p, fi.ModTime(), d.UpdatedAt)
		}
		if f == "json" {
			continue
		}
		b, _ := os.ReadFile(p)
		want, _ := statusline.Render(&d, f, d.UpdatedAt, nil)
		if strings.TrimSuffix(string(b), "\n") != strings.TrimSuffix(want, "\n") {
			t.Errorf("%s = %q, want %q", p, b, want)
		}
	}
	// No temp files left behind.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("left %s", e.Name())
		}
	}
	// A second write replaces, and the mode of an existing lax directory is tightened.
	_ = os.Chmod(dir, 0o755)
	d2 := statusline.Compose(statuslinetest.Fixtures()[statusline.StateOK])
	if err := statusline.Write(dir, d2); err != nil {
		t.Fatal(err)
	}
	got, _ = statusline.Read(dir)
	if got.State != statusline.StateOK {
		t.Errorf("state after rewrite %s", got.State)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode after rewrite %v", fi.Mode().Perm())
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := statusline.Read(dir); !errors.Is(err, statusline.ErrNoDocument) {
		t.Fatalf("missing: %v", err)
	}
	p := filepath.Join(dir, statusline.FileName)
	os.WriteFile(p, []byte("{not json"), 0o600)
	if _, err := statusline.Read(dir); !errors.Is(err, statusline.ErrBadDocument) || !strings.Contains(err.Error(), p) {
		t.Fatalf("bad json: %v", err)
	}
	os.WriteFile(p, []byte(`{"version":2}`), 0o600)
	if _, err := statusline.Read(dir); !errors.Is(err, statusline.ErrBadDocument) || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("version 2: %v", err)
	}
}

func TestShow(t *testing.T) {
	repo := t.TempDir()
	// No document: not started, no error.
	out, err := statusline.Show(repo, "plain", statuslinetest.Now, nil)
	if err != nil || out != "memd: not started" {
		t.Fatalf("missing: %q %v", out, err)
	}
	// A fresh document with a dead pid still shows (the daemon may just have exited).
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateOK])
	if err := statusline.Write(statusline.Dir(repo), d); err != nil {
		t.Fatal(err)
	}
	dead := func(int) bool { return false }
	alive := func(int) bool { return true }
	if out, _ := statusline.Show(repo, "plain", statuslinetest.Now.Add(statusline.StaleAfter), dead); out != "memd: +2 ~1 · 14:32" {
		t.Errorf("fresh, dead pid: %q", out)
	}
	// Old and dead: not running. Old and alive (an idle daemon): the document.
	if out, _ := statusline.Show(repo, "plain", statuslinetest.Now.Add(statusline.StaleAfter+time.Second), dead); out != "memd: not running" {
		t.Errorf("stale: %q", out)
	}
	if out, _ := statusline.Show(repo, "plain", statuslinetest.Now.Add(time.Hour), alive); out != "memd: +2 ~1 · 14:32" {
		t.Errorf("old, alive: %q", out)
	}
	// The real process table: this test's own pid is alive, pid 0 never is.
	d.PID = os.Getpid()
	statusline.Write(statusline.Dir(repo), d)
	if out, _ := statusline.Show(repo, "plain", statuslinetest.Now.Add(time.Hour), nil); out != "memd: +2 ~1 · 14:32" {
		t.Errorf("own pid: %q", out)
	}
	if statusline.PIDAlive(0) || !statusline.PIDAlive(os.Getpid()) {
		t.Error("PIDAlive")
	}
	// Unreadable: an error line and the error.
	os.WriteFile(filepath.Join(statusline.Dir(repo), statusline.FileName), []byte("garbage"), 0o600)
	out, err = statusline.Show(repo, "plain", statuslinetest.Now, nil)
	if !errors.Is(err, statusline.ErrBadDocument) || out != "memd: error: unreadable status.json" {
		t.Errorf("bad: %q %v", out, err)
	}
	out, _ = statusline.Show(repo, "waybar", statuslinetest.Now, nil)
	if !strings.Contains(out, `"class":"error"`) {
		t.Errorf("bad waybar: %s", out)
	}
	// Unknown format.
	if _, err := statusline.Show(repo, "html", statuslinetest.Now, nil); !errors.Is(err, statusline.ErrUnknownFormat) {
		t.Errorf("unknown format: %v", err)
	}
}

func TestEscaping(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateError]
	f.Error = "50%{F#fff} #[fg=red] a|b <i>&"
	d := statusline.Compose(f)
	tm, _ := statusline.Render(&d, "tmux", statuslinetest.Now, nil)
	if !strings.Contains(tm, "##[fg=red]") {
		t.Errorf("tmux: %q", tm)
	}
	pb, _ := statusline.Render(&d, "polybar", statuslinetest.Now, nil)
	if strings.Contains(pb, "50%{F#fff}") {
		t.Errorf("polybar: %q", pb)
	}
	wb, _ := statusline.Render(&d, "waybar", statuslinetest.Now, nil)
	if !strings.Contains(wb, "&lt;i&gt;&amp;") {
		t.Errorf("waybar: %q", wb)
	}
	sw, _ := statusline.Render(&d, "swiftbar", statuslinetest.Now, nil)
	first := strings.SplitN(sw, "\n", 2)[0]
	if strings.Count(first, "|") != 1 { // only the color= separator
		t.Errorf("swiftbar: %q", first)
	}
}

func TestComposeNoChangeWithWarnings(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateWarn]
	f.LastCommit = nil
	d := statusline.Compose(f)
	if d.Summary.Text != "memd: no change, inbox 23, tasks 12, 1 MEMORY.md over cap · 14:32" {
		t.Errorf("summary %q", d.Summary.Text)
	}
	f.LastCommit = &statusline.CommitInfo{Added: 1}
	f.Pending = 2
	if d := statusline.Compose(f); d.Summary.Text != "memd: +1 2 pending, inbox 23, tasks 12, 1 MEMORY.md over cap · 14:32" {
		t.Errorf("summary %q", d.Summary.Text)
	}
}

func TestComposeActivity(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateOK]
	f.Activity, f.Detail = "syncing", "committed 3 files"
	d := statusline.Compose(f)
	if d.State != statusline.StateBusy || d.Summary.Text != "memd: syncing… · 14:32" || d.Detail != "committed 3 files" {
		t.Fatalf("activity: %q %q %q", d.State, d.Summary.Text, d.Detail)
	}
	if l := d.Sections[0].Lines; l[0].Text != "syncing… · 14:32" || l[1].Text != "committed 3 files" {
		t.Errorf("sidebar %+v", l)
	}
}

// TestInfoKindAndAdditions: the info kind draws blue in every coloured format, and the
// document's additions are copied, bounded and cleaned (events: the newest MaxEvents; commit
// hours: exactly HoursKept; nil maps and slices as empty ones).
func TestInfoKindAndAdditions(t *testing.T) {
	p := []statusline.Part{{Text: "sleep:", Kind: statusline.KindInfo}}
	if got := statusline.ANSI(p); got != "\x1b[34msleep:\x1b[0m" {
		t.Errorf("ansi info = %q", got)
	}
	if got := statusline.Tmux(p); got != "#[fg=blue]sleep:#[default]" {
		t.Errorf("tmux info = %q", got)
	}
	if got := statusline.Polybar(p); got != "%{F#4078f2}sleep:%{F-}" {
		t.Errorf("polybar info = %q", got)
	}
	var evs []statusline.Event
	for i := 1; i <= statusline.MaxEvents+5; i++ {
		evs = append(evs, statusline.Event{ID: uint64(i), Kind: statusline.KindInfo, Text: "a\nb\x1b[31m", Parts: []statusline.Part{{Text: "a\nb\x1b[31m"}}})
	}
	d := statusline.Compose(statusline.Facts{Now: statuslinetest.Now, Events: evs, CommitsPerHour: make([]int, 30)})
	if len(d.Events) != statusline.MaxEvents || d.Events[0].ID != 6 || d.Events[0].Text != `a\nb\x1b[31m` || d.Events[0].Parts[0].Text != `a\nb\x1b[31m` {
		t.Errorf("events = %d, first %+v", len(d.Events), d.Events[0])
	}
	evs[len(evs)-1].Text = "changed"
	if d.Events[statusline.MaxEvents-1].Text == "changed" {
		t.Error("events are not copied")
	}
	if len(d.CommitsPerHour) != statusline.HoursKept || d.Memories == nil || d.LedgerNotes == nil || d.ConflictCopies == nil {
		t.Errorf("additions = %+v", d)
	}
	b, _ := json.Marshal(statusline.Compose(statusline.Facts{Now: statuslinetest.Now}))
	for _, k := range []string{`"task_inbox":0`, `"memories":{}`, `"arcs":0`, `"ledger_notes":{}`, `"conflict_copies":[]`, `"commits_per_hour":[0,`, `"events":[]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("json lacks %s: %s", k, b)
		}
	}
}

// A document memd cannot read is one error line on stderr naming the file once, and the
// error line on stdout; the exit code stays 0 (a prompt must not break).
func TestCommandUnreadableDocumentErrorsOnce(t *testing.T) {
	for name, make := range map[string]func(p string) error{
		"directory": func(p string) error { return os.Mkdir(p, 0o755) },
		"garbage":   func(p string) error { return os.WriteFile(p, []byte("{bad"), 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			repo := t.TempDir()
			state := filepath.Join(repo, ".git", "memd")
			if err := os.MkdirAll(state, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(state, statusline.FileName)
			if err := make(p); err != nil {
				t.Fatal(err)
			}
			var out, errb strings.Builder
			if code := statusline.Command(repo, "plain", time.Now(), strings.NewReader(""), &out, &errb); code != 0 {
				t.Errorf("exit %d", code)
			}
			if out.String() != "memd: error: unreadable status.json\n" {
				t.Errorf("stdout %q", out.String())
			}
			if n := strings.Count(errb.String(), "\n"); n != 1 || strings.Count(errb.String(), p) != 1 {
				t.Errorf("stderr %q: want one line naming %s once", errb.String(), p)
			}
		})
	}
}

// A remote's name with a bidi override or a C1 control shows as an escape in every line
// format (the old clean dropped C0/C1 silently and let U+202E through).
func TestRenderEscapesBidiAndC1(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateError]
	f.Error = "conflict in evil\u202elmth.exe \u009b2J"
	d := statusline.Compose(f)
	for _, format := range statusline.LineFormats {
		out, err := statusline.Render(&d, format, statuslinetest.Now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(out, "\u202e\u009b") || !strings.Contains(out, `\u202e`) {
			t.Errorf("%s: %q", format, out)
		}
	}
}
