package procgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// How a run's descendants are found and ended on Linux, best first:
//   - a cgroup v2 of the run's own, made under memd's cgroup when that is writable (memd run
//     as root, or under a systemd unit with Delegate=): the command starts inside it
//     (clone3 CLONE_INTO_CGROUP), nothing it forks can leave, and cgroup.kill ends them all;
//   - else memd becomes a child subreaper (PR_SET_CHILD_SUBREAPER), so a setsid or
//     double-forked descendant is reparented to memd rather than to init, and every process
//     carrying the run's marker variable (TreeMarkerVar) or descending from one is killed.
//     A descendant that both clears its environment and leaves the tree escapes this one.
const (
	// TreeMarkerVar is set in every command's environment to a value unique to the run,
	// so the subreaper fallback can find what the run started.
	TreeMarkerVar = "MEMD_PROCTREE"
	cgroupPrefix  = "memd-run-"
)

// KillMode says which mechanism ends a run's descendants, for the README's table and tests.
type KillMode string

const (
	ModeCgroup    KillMode = "cgroup"
	ModeSubreaper KillMode = "subreaper"
)

var (
	cgroupOnce sync.Once
	cgroupBase string // memd's own cgroup v2 directory, "" when none is writable
	runSeq     atomic.Uint64

	// forceSubreaper is the tests' switch to exercise the fallback where a cgroup works.
	forceSubreaper atomic.Bool

	subreaperOnce sync.Once
)

// Mode reports the mechanism the next run will use.
func Mode() KillMode {
	if base := cgroupRoot(); base != "" && !forceSubreaper.Load() {
		return ModeCgroup
	}
	return ModeSubreaper
}

// tree is one run's set of processes.
type tree struct {
	dir    string // the run's cgroup, "" in the subreaper mode
	fd     int
	marker string
}

// newTree prepares cmd so that all it starts can be ended by kill.
func newTree(cmd *exec.Cmd) *tree {
	t := &tree{fd: -1, marker: fmt.Sprintf("%d-%d-%d", os.Getpid(), runSeq.Add(1), time.Now().UnixNano())}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(withoutVar(env, TreeMarkerVar), TreeMarkerVar+"="+t.marker)
	if Mode() == ModeCgroup {
		dir := filepath.Join(cgroupRoot(), cgroupPrefix+t.marker)
		if err := os.Mkdir(dir, 0o755); err == nil {
			if fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
				t.dir, t.fd = dir, fd
				cmd.SysProcAttr.UseCgroupFD = true
				cmd.SysProcAttr.CgroupFD = fd
				return t
			}
			_ = os.Remove(dir)
		}
	}
	// Without it the fallback still kills what carries the marker; only the reparenting of
	// an escaped descendant to memd is lost, so the error changes nothing to do here.
	subreaperOnce.Do(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) })
	return t
}

// refused is called when the command did not start: in the cgroup mode that may be the
// clone into the cgroup, refused (EACCES, EBUSY); the cgroup mode is then off for good.
func (t *tree) refused() bool {
	if t.dir == "" {
		return false
	}
	forceSubreaper.Store(true)
	return true
}

// kill ends every process of the run and, when wait (the run is over), waits (bounded)
// until none is left. The context's cancel does not wait: the leader stays a zombie in
// its cgroup until exec reaps it, after the cancel returns.
func (t *tree) kill(wait bool) {
	if t.dir != "" {
		t.killCgroup(wait)
		return
	}
	deadline := time.Now().Add(WaitDelay)
	ours := map[int]bool{} // killed descendants reparented to memd (the subreaper): memd reaps them
	for time.Now().Before(deadline) {
		procs := scanProcs()
		pids := t.members(procs)
		if len(pids) == 0 {
			break
		}
		for _, pid := range pids {
			if procs[pid] == os.Getpid() {
				ours[pid] = true
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for pid := range ours {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	}
}

func (t *tree) killCgroup(wait bool) {
	if err := os.WriteFile(filepath.Join(t.dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		// Kernels before 5.14 have no cgroup.kill: kill what cgroup.procs lists.
		for _, pid := range cgroupProcs(t.dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(WaitDelay)
	for wait && len(cgroupProcs(t.dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// close releases the run's cgroup.
func (t *tree) close() {
	if t.fd >= 0 {
		_ = unix.Close(t.fd)
		t.fd = -1
	}
	if t.dir != "" {
		_ = os.Remove(t.dir)
	}
}

// members are the live processes of a subreaper-mode run: those carrying its marker and
// every descendant of one of them. (Never "the leader's pid": once reaped, it may be reused.)
func (t *tree) members(procs map[int]int) []int {
	in := map[int]bool{}
	want := TreeMarkerVar + "=" + t.marker
	for pid := range procs {
		if hasEnv(pid, want) {
			in[pid] = true
		}
	}
	for grew := true; grew; {
		grew = false
		for pid, ppid := range procs {
			if !in[pid] && in[ppid] {
				in[pid], grew = true, true
			}
		}
	}
	var out []int
	for pid := range in {
		if _, live := procs[pid]; live && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

// scanProcs maps each live (non-zombie) process to its parent.
func scanProcs() map[int]int {
	ents, _ := os.ReadDir("/proc")
	out := map[int]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// comm may hold spaces and parentheses: the fields start after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[0] == "X" {
			continue // dead already; only reaping is left
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = ppid
	}
	return out
}

func hasEnv(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	for _, e := range bytes.Split(b, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupRoot finds memd's own cgroup v2 directory and checks that a child can be made in
// it (once per process); it also ends the runs a killed memd left behind there.
func cgroupRoot() string {
	cgroupOnce.Do(func() {
		dir, err := ownCgroup()
		if err != nil {
			return
		}
		probe := filepath.Join(dir, cgroupPrefix+"probe-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil {
			return
		}
		_ = os.Remove(probe)
		sweepStale(dir)
		cgroupBase = dir
	})
	return cgroupBase
}

// ownCgroup is the cgroup v2 mount point joined with this process's path in it.
func ownCgroup() (string, error) {
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	rel := ""
	for _, line := range strings.Split(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if rel == "" {
		return "", errors.New("no cgroup v2 membership")
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: ... mountpoint ... - fstype source options
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 {
			continue
		}
		return filepath.Join(fields[4], rel), nil
	}
	return "", errors.New("no cgroup v2 mount")
}

// sweepStale ends the runs of a memd that died without cleaning up (its pid is gone).
func sweepStale(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		old := &tree{dir: filepath.Join(dir, e.Name()), fd: -1}
		old.killCgroup(true)
		old.close()
	}
}

func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Prepare finds the cgroup runs will use and ends the runs a killed memd left in it; memd
// run calls it at start, so leftovers go then rather than at the first hook.
func Prepare() KillMode { return Mode() }
