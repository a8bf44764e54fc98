package hooks

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// One valid tree entry named "x.html\n..\n--all\n-rf" is one path to a hook: the list is
// NUL-terminated (MEMD_CHANGED_FORMAT=nul) and `xargs -0` hands it on as one argument.
// On main the file listed it one path per line: four forged lines.
func TestChangedFileIsNULTerminated(t *testing.T) {
	forged := "x.html\n..\n--all\n-rf"
	s := spec(t, "after_sync", "sh", "-c", `echo "$MEMD_CHANGED_FORMAT"; xargs -0 -n1 printf '<%s>' < "$MEMD_CHANGED_FILE"; od -An -c "$MEMD_CHANGED_FILE" | tr -d ' \n'`)
	s.Changed = []string{forged, "areas/b.html"}
	res := Exec(context.Background(), s)
	if res.Err != nil {
		t.Fatal(res.Err, res.Output)
	}
	want := "nul\n<" + forged + "><areas/b.html>" + `x.html\n..\n--all\n-rf\0areas/b.html\0`
	if res.Output != want {
		t.Fatalf("the hook read %q, want %q", res.Output, want)
	}
}

// A hook's environment is the §9 set, hooks.env and its own MEMD_* variables: never the
// push token (MEMD_GIT_TOKEN, nor sync.token_env, even when hooks.env names them), nor
// anything else memd was started with. On main the hook inherited everything.
func TestHookEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("MEMD_GIT_TOKEN", "ghp_default")
	t.Setenv("HOSTILE_TOKEN", "ghp_configured")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws")
	t.Setenv("INDEX_URL", "http://127.0.0.1:1")
	t.Setenv("LANG", "C.UTF-8")
	dir := t.TempDir()
	r := NewRunner(Options{Dir: dir, TempDir: filepath.Join(dir, "state"), TokenEnv: "HOSTILE_TOKEN",
		Config: memd.HooksConfig{AfterSync: []string{"env"}, Env: []string{"INDEX_URL", "HOSTILE_TOKEN", "MEMD_GIT_TOKEN"}}})
	res, ran := r.Run(context.Background(), memd.HookAfterSync, oldHead, newHead)
	if !ran || res.Err != nil {
		t.Fatal(res.Err)
	}
	var names []string
	for _, kv := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	sort.Strings(names)
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TZ": true, "TMPDIR": true, "USER": true,
		"INDEX_URL": true, "PWD": true, "MEMD_HOOK": true, "MEMD_REPO": true, "MEMD_OLD_HEAD": true, "MEMD_NEW_HEAD": true,
		"MEMD_CHANGED_FILE": true, "MEMD_CHANGED_FORMAT": true, "MEMD_PROCTREE": true}
	for _, n := range names {
		if !allowed[n] {
			t.Errorf("the hook got %s (all: %v)", n, names)
		}
	}
	for _, must := range []string{"PATH", "LANG", "INDEX_URL", "MEMD_CHANGED_FORMAT"} {
		if !strings.Contains(res.Output, must+"=") {
			t.Errorf("the hook lacks %s:\n%s", must, res.Output)
		}
	}
	if strings.Contains(res.Output, "ghp_") {
		t.Errorf("a token reached the hook:\n%s", res.Output)
	}
}

// A hook's setsid child (a session of its own, out of the process group) ends with the
// hook. On main it survived the process-group kill and memd itself.
func TestHookSetsidChildEnds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("NOTE: reads /proc; outside Linux only the process group is killed (README)")
	}
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("NOTE: no setsid binary")
	}
	pidfile := filepath.Join(t.TempDir(), "child")
	s := spec(t, "after_sync", "sh", "-c", `setsid sh -c 'echo $$ > "$PIDFILE"; exec sleep 30' </dev/null >/dev/null 2>&1 &
		while [ ! -s "$PIDFILE" ]; do sleep 0.01; done`)
	s.AllowEnv = []string{"PIDFILE"}
	t.Setenv("PIDFILE", pidfile)
	res := Exec(context.Background(), s)
	if res.Err != nil {
		t.Fatal(res.Err, res.Output)
	}
	pid := childPID(t, pidfile)
	// SIGKILLed before Exec returned; the kernel may take a moment to finish its exit.
	testutil.WaitFor(t, "the hook's setsid child to be gone after the hook ended", 2*time.Second, func() bool { return !alive(pid) }, nil)
}

// A hook that failed three times and then succeeds is told every change since its last
// success (the failed runs' too) with the old HEAD of the first failed run; the run after
// that lists only its own. The record survives a new Runner (a restarted memd). On main
// the fourth run listed its own range only.
func TestChangedListCoversFailedRuns(t *testing.T) {
	dir := t.TempDir()
	fail := filepath.Join(dir, "fail")
	if err := os.WriteFile(fail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := memd.HooksConfig{AfterSync: []string{"sh", "-c", `echo "$MEMD_OLD_HEAD"; tr '\0' '\n' < "$MEMD_CHANGED_FILE"; [ ! -e fail ]`}}
	newR := func() *Runner {
		return NewRunner(Options{Dir: dir, TempDir: filepath.Join(dir, ".git", "memd"), Config: cfg,
			Changed: func(o, n string) ([]string, error) { return []string{"p" + n[:1] + ".html", "shared.html"}, nil }})
	}
	r := newR()
	for i := 1; i <= 3; i++ {
		if res, _ := r.Run(context.Background(), memd.HookAfterSync, head(i), head(i+1)); res.Err == nil {
			t.Fatalf("run %d did not fail", i)
		}
		if i == 2 {
			r = newR() // memd restarted between two failures
		}
	}
	if err := os.Remove(fail); err != nil {
		t.Fatal(err)
	}
	res, _ := r.Run(context.Background(), memd.HookAfterSync, head(4), head(5))
	want := []string{head(1), "p2.html", "shared.html", "p3.html", "p4.html", "p5.html"}
	if got := strings.Fields(res.Output); res.Err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("after three failures the hook was told %q (%v), want %q", got, res.Err, want)
	}
	res, _ = r.Run(context.Background(), memd.HookAfterSync, head(5), head(6))
	if got := strings.Fields(res.Output); !reflect.DeepEqual(got, []string{head(5), "p6.html", "shared.html"}) {
		t.Fatalf("after a success the hook was told %q", got)
	}
}

// A failed hook's error ends with the last line of its stderr, escaped and capped, so the
// status says why; on main it said "exit status 1" alone.
func TestFailedHookNamesLastStderrLine(t *testing.T) {
	s := spec(t, "after_sync", "sh", "-c", `echo progress; echo "warming up" >&2; printf 'fatal: \033]52;c;aGk=\007index %s locked\n' "$(printf 'x%.0s' $(seq 300))" >&2; exit 1`)
	res := Exec(context.Background(), s)
	msg := res.Err.Error()
	if !strings.Contains(msg, `exit status 1: fatal: \x1b]52;c;aGk=\x07index xxx`) || !strings.HasSuffix(msg, "…") {
		t.Fatalf("error %q does not name the last stderr line", msg)
	}
	if strings.ContainsAny(msg, "\x1b\x07") || len(res.StderrLine) > stderrLineBytes+20 {
		t.Fatalf("the stderr line is raw or uncapped: %q", res.StderrLine)
	}
}

// The changed-paths file is made through statedir: with the state dir a symlink to a
// directory elsewhere the hook does not run, the error names the file, and nothing is
// written where the link points (on main os.CreateTemp followed the link).
func TestChangedFileRefusesASymlinkedStateDir(t *testing.T) {
	s := spec(t, "after_sync", "true")
	s.Changed = []string{"a.html"}
	outside := t.TempDir()
	if err := os.Mkdir(filepath.Join(s.Dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.TempDir = filepath.Join(s.Dir, ".git", "memd")
	if err := os.Symlink(outside, s.TempDir); err != nil {
		t.Fatal(err)
	}
	res := Exec(context.Background(), s)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "changed-paths file") {
		t.Fatalf("hook through a symlinked state dir: err %v", res.Err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the changed-paths file went through the symlink: %v", ents)
	}
}
