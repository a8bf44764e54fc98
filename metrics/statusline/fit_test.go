package statusline_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// visible is what a reader draws of one rendered line: its markup taken out.
var markup = regexp.MustCompile(`\x1b\[[0-9;]*m|#\[[^\]]*\]|%\{[^}]*\}`)

func visibleLine(t *testing.T, format, out string) string {
	t.Helper()
	switch format {
	case "waybar":
		var v struct{ Text string }
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatal(err)
		}
		return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&#39;", "'", "&#34;", `"`).Replace(v.Text)
	case "i3blocks", "swiftbar":
		first, _, _ := strings.Cut(out, "\n")
		first, _, _ = strings.Cut(first, " | color=")
		return first
	case "tmux":
		return strings.ReplaceAll(markup.ReplaceAllString(out, ""), "##", "#")
	}
	return markup.ReplaceAllString(out, "")
}

// Every line format fits 80 columns, whatever the error, the remote or the warnings; what is
// cut is said (an ellipsis, `+N warnings`), and the state is never what goes.
func TestEveryFormatFits80Columns(t *testing.T) {
	base := statuslinetest.Fixtures()[statusline.StateOK]
	long := strings.Repeat("very-long-remote-path/", 8)
	cases := map[string]func(f *statusline.Facts){
		"error": func(f *statusline.Facts) {
			f.Error = "push ssh://git@example.invalid/" + long + ": exit status 128: fatal: could not read from remote repository"
		},
		"four warnings": func(f *statusline.Facts) {
			f.Inbox, f.TaskInbox, f.Invalid, f.Duplicates = 23, 12, 4, 2
			f.OverCapMD = []string{"projects/a/MEMORY.md", "projects/b/MEMORY.md"}
			f.UntemplatedMD = []string{"projects/c/MEMORY.md"}
			f.Behind, f.Pending = 3, 12
		},
		"wide text": func(f *statusline.Facts) { f.Extra = []string{strings.Repeat("記憶", 40)} },
		"busy":      func(f *statusline.Facts) { f.Activity = "syncing " + long },
	}
	for name, edit := range cases {
		f := base
		edit(&f)
		d := statusline.Compose(f)
		for _, format := range statusline.LineFormats {
			out, err := statusline.Render(&d, format, statuslinetest.Now, func(int) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if w := statusline.Width(visibleLine(t, format, out)); w > statusline.MaxColumns {
				t.Errorf("%s.%s is %d columns: %q", name, format, w, visibleLine(t, format, out))
			}
		}
		if !strings.HasPrefix(d.Summary.Text, "memd: ") || !strings.HasSuffix(d.Summary.Text, " · 14:32") {
			t.Errorf("%s: front or clock lost: %q", name, d.Summary.Text)
		}
	}
	f := base
	cases["four warnings"](&f)
	d := statusline.Compose(f)
	if want := "memd: +2 ~1 ↓3, 12 pending, inbox 23, tasks 12, 4 invalid, +3 warnings · 14:32"; d.Summary.Text != want {
		t.Errorf("elided line\n got %q\nwant %q", d.Summary.Text, want)
	}
	f = base
	cases["error"](&f)
	if d := statusline.Compose(f); !strings.HasPrefix(d.Summary.Text, "memd: error: push ssh://") || !strings.Contains(d.Summary.Text, "… · 14:32") {
		t.Errorf("error line %q", d.Summary.Text)
	}
}

// A hand-written document with a long summary is cut by Render too.
func TestRenderCutsHandWrittenLine(t *testing.T) {
	d := statusline.Document{Version: 1, UpdatedAt: statuslinetest.Now, State: statusline.StateOK,
		Summary: statusline.Summary{Text: strings.Repeat("x", 200)}}
	for _, format := range statusline.LineFormats {
		out, _ := statusline.Render(&d, format, statuslinetest.Now, func(int) bool { return true })
		if w := statusline.Width(visibleLine(t, format, out)); w > statusline.MaxColumns {
			t.Errorf("%s: %d columns", format, w)
		}
	}
}

func TestLinePunctuation(t *testing.T) {
	base := statuslinetest.Fixtures()[statusline.StateOK]
	cases := []struct {
		edit func(f *statusline.Facts)
		want string
	}{
		{func(f *statusline.Facts) { f.LastCommit, f.Offline, f.Ahead = nil, true, 2 }, "memd: no change, offline, 2 ahead · 14:32"},
		{func(f *statusline.Facts) { f.Offline, f.Ahead = true, 2 }, "memd: +2 ~1 offline, 2 ahead · 14:32"},
		{func(f *statusline.Facts) { f.LastCommit, f.Inbox = nil, 30 }, "memd: no change, inbox 30 · 14:32"},
		{func(f *statusline.Facts) { f.Duplicates = 1 }, "memd: +2 ~1 1 duplicate · 14:32"},
		{func(f *statusline.Facts) { f.LastCommit, f.Behind, f.Pending = nil, 1, 2 }, "memd: no change, ↓1, 2 pending · 14:32"},
	}
	for i, c := range cases {
		f := base
		c.edit(&f)
		if got := statusline.Compose(f).Summary.Text; got != c.want {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
	f := base
	f.Duplicates = 2
	d := statusline.Compose(f)
	if d.State != statusline.StateWarn || !strings.Contains(fmt.Sprint(d.Warnings), "2 duplicate articles") {
		t.Errorf("duplicates: state %s warnings %v", d.State, d.Warnings)
	}
}
