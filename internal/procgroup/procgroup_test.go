package procgroup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// alive reports whether the process whose pid is in file still runs.
func alive(t *testing.T, file string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q: %v", b, err)
	}
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A killed process whose parent is an init that reaps late is a zombie: dead.
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // no /proc (macOS): kill(0) is all there is
	}
	i := strings.LastIndexByte(string(st), ')')
	return i < 0 || len(st) < i+3 || st[i+2] != 'Z'
}

func waitGone(t *testing.T, file string) {
	t.Helper()
	testutil.WaitFor(t, "the command's child to be gone with it", 10*time.Second, func() bool { return !alive(t, file) }, nil)
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	pid := filepath.Join(dir, "pid")
	cases := []struct {
		name string
		argv []string
		o    Options
		want error
		out  string
	}{
		{"ok, stdin passed, argv literal", []string{"sh", "-c", `cat; printf '%s' "$1"`, "sh", "$HOME; rm -rf /"}, Options{Stdin: strings.NewReader("in:")}, nil, "in:$HOME; rm -rf /"},
		{"exit code", []string{"sh", "-c", "echo oops >&2; exit 7"}, Options{StderrKeep: 3}, errors.New("exit status 7"), ""},
		{"cap", []string{"sh", "-c", "yes"}, Options{MaxOutput: 1000}, ErrOutputTooLarge, strings.Repeat("y\n", 500)},
		{"timeout kills the group", []string{"sh", "-c", "sleep 30 & echo $! > " + pid + "; wait"}, Options{Timeout: 200 * time.Millisecond}, ErrTimeout, ""},
		{"no command", nil, Options{}, ErrNoCommand, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Run(context.Background(), c.argv, c.o)
			switch {
			case c.want == nil && r.Err != nil:
				t.Fatalf("err %v", r.Err)
			case c.want != nil && (r.Err == nil || !errors.Is(r.Err, c.want) && r.Err.Error() != c.want.Error()):
				t.Fatalf("err %v, want %v", r.Err, c.want)
			}
			if string(r.Output) != c.out {
				t.Errorf("output %q, want %q", r.Output, c.out)
			}
			if c.name == "exit code" && string(r.Stderr) != "oop" {
				t.Errorf("stderr kept %q, want the first 3 bytes", r.Stderr)
			}
			if strings.Contains(c.name, "group") {
				waitGone(t, pid)
			}
		})
	}
}

// A command that exits 0 but leaves a child holding its output open succeeded; the child
// is killed with the group.
func TestRunChildHoldingOutput(t *testing.T) {
	pid := filepath.Join(t.TempDir(), "pid")
	r := Run(context.Background(), []string{"sh", "-c", "echo done; sleep 30 & echo $! > " + pid}, Options{MergeStderr: true})
	if r.Err != nil || string(r.Output) != "done\n" {
		t.Fatalf("got %q, %v", r.Output, r.Err)
	}
	waitGone(t, pid)
}

func TestScrubEnv(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/h", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=/t", "USER=u", "LC_ALL=C",
		"MEMD_GIT_TOKEN=ghp_x", "GH_TOKEN=ghp_y", "SSH_AUTH_SOCK=/s", "MEMD_OLD_HEAD=abc", "INDEX_URL=http://x", "=odd"}
	got := ScrubEnv(env, []string{"INDEX_URL", "MEMD_GIT_TOKEN", "GH_TOKEN", "UNSET"}, []string{"GH_TOKEN"})
	want := "PATH=/bin HOME=/h LANG=C.UTF-8 TZ=UTC TMPDIR=/t USER=u INDEX_URL=http://x"
	if strings.Join(got, " ") != want {
		t.Fatalf("ScrubEnv = %q, want %q", got, want)
	}
}
