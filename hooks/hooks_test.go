package hooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

const (
	oldHead = "1111111111111111111111111111111111111111"
	newHead = "2222222222222222222222222222222222222222"
)

func spec(t *testing.T, hook string, argv ...string) Spec {
	t.Helper()
	return Spec{Hook: hook, Argv: argv, Dir: t.TempDir(), Timeout: 30 * time.Second, OldHead: oldHead, NewHead: newHead}
}

// Every argument reaches the command as it is: no shell expands, splits or globs it.
func TestArgvPassedLiterally(t *testing.T) {
	args := []string{"$HOME", "a b", "*", ";", "`id`", "$(id)", "'q'", "", "--x=y z"}
	res := Exec(context.Background(), spec(t, "after_sync", append([]string{"printf", `%s|\n`}, args...)...))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString(a + "|\n")
	}
	if res.Output != want.String() {
		t.Errorf("output %q, want %q", res.Output, want.String())
	}
	if res.Status != memd.HookOK || !reflect.DeepEqual(res.Argv[2:], args) {
		t.Errorf("result %+v", res)
	}
}

// The hook runs in the repo with the documented variables (replacing inherited ones), and
// MEMD_CHANGED_FILE lists the changed paths NUL-terminated and is gone afterwards.
func TestEnvironmentAndChangedFile(t *testing.T) {
	t.Setenv("MEMD_OLD_HEAD", "inherited")
	t.Setenv("HOOK_TEST_KEEP", "kept")
	s := spec(t, "after_sleep", "sh", "-c",
		`printf '%s\n' "$MEMD_HOOK" "$MEMD_REPO" "$MEMD_OLD_HEAD" "$MEMD_NEW_HEAD" "$MEMD_CHANGED_FILE" "$HOOK_TEST_KEEP" "$(pwd -P)"; `+
			`env | grep -c '^MEMD_OLD_HEAD='; tr '\0' '\n' < "$MEMD_CHANGED_FILE"`)
	s.AllowEnv = []string{"HOOK_TEST_KEEP"}
	s.Changed = []string{"areas/a b.html", "areas/arcs/x-2026.html", "memory.jsonl"}
	s.TempDir = filepath.Join(s.Dir, ".git", "memd") // created as needed, as memd's state dir
	res := Exec(context.Background(), s)
	if res.Err != nil {
		t.Fatal(res.Err, res.Output)
	}
	lines := strings.Split(strings.TrimSuffix(res.Output, "\n"), "\n")
	if len(lines) != 11 {
		t.Fatalf("output %q", res.Output)
	}
	dir, _ := filepath.EvalSymlinks(s.Dir)
	want := []string{"after_sleep", s.Dir, oldHead, newHead}
	if !reflect.DeepEqual(lines[:4], want) || lines[5] != "kept" || lines[6] != dir || lines[7] != "1" {
		t.Errorf("environment %q, want %q, kept, %s, one MEMD_OLD_HEAD", lines, want, dir)
	}
	if !reflect.DeepEqual(lines[8:], s.Changed) || res.Changed != 3 {
		t.Errorf("changed file lists %q (%d), want %q", lines[8:], res.Changed, s.Changed)
	}
	if filepath.Dir(lines[4]) != s.TempDir {
		t.Errorf("changed file %s is not in %s", lines[4], s.TempDir)
	}
	if _, err := os.Stat(lines[4]); !os.IsNotExist(err) {
		t.Errorf("changed file %s left behind: %v", lines[4], err)
	}
}

// A hook that prints 100 MB is killed at the cap with an error naming the hook key, and memd
// keeps exactly the cap.
func TestOutputCap(t *testing.T) {
	res := Exec(context.Background(), spec(t, "after_sync", "head", "-c", "104857600", "/dev/zero"))
	if !errors.Is(res.Err, ErrOutputTooLarge) || res.Status != memd.HookError {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	if !strings.Contains(res.Err.Error(), "hooks.after_sync") || !strings.Contains(res.Err.Error(), `"head"`) {
		t.Errorf("error %q does not name the hook key and command", res.Err)
	}
	if len(res.Output) != MaxOutputBytes {
		t.Errorf("kept %d bytes, want %d", len(res.Output), MaxOutputBytes)
	}
	// stderr counts too.
	res = Exec(context.Background(), spec(t, "after_sync", "sh", "-c", "head -c 3000000 /dev/zero >&2"))
	if !errors.Is(res.Err, ErrOutputTooLarge) {
		t.Errorf("stderr flood: %v", res.Err)
	}
}

// alive is whether pid runs (a zombie waiting for its reaper does not count).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func childPID(t *testing.T, path string) int {
	t.Helper()
	var pid int
	testutil.WaitFor(t, "the hook to record its child's pid", 10*time.Second, func() bool {
		b, err := os.ReadFile(path)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	}, nil)
	return pid
}

// At the timeout the whole process group goes, the hook's children included; and a child
// that outlives a hook which exited (holding its output open or not) goes too.
func TestTimeoutKillsProcessGroup(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	cases := []struct {
		name, script string
		status       string
	}{
		{"timeout", `sleep 30 & echo $! > "$PIDFILE"; sleep 30`, memd.HookTimeout},
		{"child outlives the hook", `sleep 30 >/dev/null 2>&1 & echo $! > "$PIDFILE"`, memd.HookOK},
		{"child keeps the output open", `sleep 30 & echo $! > "$PIDFILE"`, memd.HookOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pidfile := filepath.Join(t.TempDir(), "child")
			t.Setenv("PIDFILE", pidfile)
			s := spec(t, "after_sleep", "sh", "-c", c.script)
			s.AllowEnv = []string{"PIDFILE"} // hooks.env: the scrubbed environment lacks it otherwise
			s.Timeout = 500 * time.Millisecond
			start := time.Now()
			res := Exec(context.Background(), s)
			if res.Status != c.status {
				t.Fatalf("status %s (%v), want %s", res.Status, res.Err, c.status)
			}
			if c.status == memd.HookTimeout && (!errors.Is(res.Err, ErrTimeout) || !strings.Contains(res.Err.Error(), "hooks.after_sleep")) {
				t.Errorf("error %v", res.Err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("Exec took %s", d)
			}
			pid := childPID(t, pidfile)
			testutil.WaitFor(t, "the hook's child to be killed", 10*time.Second, func() bool { return !alive(pid) }, nil)
		})
	}
}

// A command that cannot run, or fails, is an error naming the hook key; nothing panics.
func TestBadCommands(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "hook.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil { // no x bit
		t.Fatal(err)
	}
	cases := []struct {
		argv []string
		want string
	}{
		{[]string{script}, "permission denied"},
		{[]string{"memd-no-such-hook-command"}, "not found"},
		{[]string{"sh", "-c", "echo oops >&2; exit 3"}, "exit status 3"},
		{[]string{""}, "no command"},
		{nil, "no command"},
	}
	for _, c := range cases {
		res := Exec(context.Background(), spec(t, "after_commit", c.argv...))
		if res.Status != memd.HookError || res.Err == nil || !strings.Contains(res.Err.Error(), "hooks.after_commit") || !strings.Contains(res.Err.Error(), c.want) {
			t.Errorf("%q: status %s, err %v; want an error naming hooks.after_commit and %q", c.argv, res.Status, res.Err, c.want)
		}
	}
	res := Exec(context.Background(), spec(t, "after_commit", "sh", "-c", "echo oops >&2; exit 3"))
	if res.Output != "oops\n" {
		t.Errorf("stderr not kept: %q", res.Output)
	}
}

// recorder collects the Runner's results.
type recorder struct {
	mu  sync.Mutex
	got []Result
}

func (r *recorder) done(res Result) { r.mu.Lock(); r.got = append(r.got, res); r.mu.Unlock() }
func (r *recorder) results() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Result(nil), r.got...)
}

func newRunner(t *testing.T, dir string, cfg memd.HooksConfig) (*Runner, *recorder) {
	t.Helper()
	rec := &recorder{}
	if cfg.Timeout == 0 {
		cfg.Timeout = memd.Duration(30 * time.Second)
	}
	r := NewRunner(Options{Dir: dir, Config: cfg, Done: rec.done,
		Changed: func(o, n string) ([]string, error) { return []string{o[:4] + ".." + n[:4]}, nil }})
	t.Cleanup(func() { r.Close(0) })
	return r, rec
}

func head(i int) string { return strings.Repeat(strconv.Itoa(i%10), 40) }

// Notifications that arrive while a hook runs make one more run, spanning the whole burst.
func TestNotifyCoalesces(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	release := filepath.Join(dir, "release")
	r, rec := newRunner(t, dir, memd.HooksConfig{AfterSync: []string{"sh", "-c",
		`echo "$MEMD_OLD_HEAD $MEMD_NEW_HEAD $(cat "$MEMD_CHANGED_FILE")" >> runs; while [ ! -e release ]; do sleep 0.02; done`}})
	runs := func() []string {
		b, _ := os.ReadFile(log)
		return strings.Fields(string(b))
	}
	if !r.Notify("after_sync", head(1), head(2)) {
		t.Fatal("Notify did not take a configured hook")
	}
	testutil.WaitFor(t, "the first run to start", 10*time.Second, func() bool { return len(runs()) == 3 }, nil)
	for i := 2; i < 6; i++ {
		r.Notify("after_sync", head(i), head(i+1))
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{head(1), head(2), "1111..2222", head(2), head(6), "2222..6666"}
	if got := runs(); !reflect.DeepEqual(got, want) {
		t.Errorf("runs %q, want two: the first and one spanning the burst %q", got, want)
	}
	if got := rec.results(); len(got) != 2 || got[1].Old != head(2) || got[1].New != head(6) || got[1].Status != memd.HookOK {
		t.Errorf("results %+v", got)
	}
}

// Nothing runs when HEAD did not move, for a hook without a command, or after Close.
func TestNotifyRunsOnlyWhatIsConfigured(t *testing.T) {
	dir := t.TempDir()
	r, rec := newRunner(t, dir, memd.HooksConfig{AfterSleep: []string{"true"}})
	if r.Notify("after_sleep", head(1), head(1)) || r.Notify("after_sync", head(1), head(2)) || r.Notify("after_nothing", head(1), head(2)) {
		t.Error("Notify took a run that should not happen")
	}
	if r.Configured("after_sync") || !r.Configured("after_sleep") {
		t.Error("Configured is wrong")
	}
	r.SetConfig(memd.HooksConfig{AfterSync: []string{"true"}, Timeout: memd.Duration(time.Second)})
	if !r.Notify("after_sync", head(1), head(2)) {
		t.Error("SetConfig did not add after_sync")
	}
	if _, ran := r.Run(context.Background(), "after_sleep", head(1), head(2)); ran {
		t.Error("after_sleep ran after SetConfig removed it")
	}
	r.Close(10 * time.Second)
	if r.Notify("after_sync", head(2), head(3)) {
		t.Error("Notify after Close")
	}
	if got := rec.results(); len(got) != 1 || got[0].Hook != "after_sync" {
		t.Errorf("results %+v", got)
	}
}

// A hook that sleeps 10 s never holds the notifier up: five notifications return at once
// while the first run still sleeps, and Close kills it rather than waiting it out.
func TestNotifyNeverBlocks(t *testing.T) {
	dir := t.TempDir()
	r, rec := newRunner(t, dir, memd.HooksConfig{AfterSync: []string{"sh", "-c", "echo x >> started; sleep 10"}})
	for i := 0; i < 5; i++ {
		r.Notify("after_sync", head(i), head(i+1))
	}
	// All five returned; the hook has started once and is still sleeping.
	testutil.WaitFor(t, "the hook to start", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "started"))
		return string(b) == "x\n"
	}, nil)
	if !r.Busy() || len(rec.results()) != 0 {
		t.Fatalf("busy %v, results %+v", r.Busy(), rec.results())
	}
	r.Close(0)
	if r.Busy() {
		t.Error("busy after Close")
	}
	got := rec.results()
	if len(got) != 1 || got[0].Status != memd.HookError || !strings.Contains(got[0].Err.Error(), "stopped") {
		t.Errorf("results after Close: %+v (want the killed run only; the waiting one dropped)", got)
	}
}
