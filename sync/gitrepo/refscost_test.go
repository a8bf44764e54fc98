package gitrepo

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestRefsCostRatio (MEMD_LONG=1; bench/RESULTS.md "refs"): a sync that fetches one new
// commit from a remote with 300k other refs costs no more than from one with 10: time and
// memd's own peak RSS (VmHWM) within 1.5x. Each sync runs in a child process (this test binary) so its RSS is
// its own; the remote is served over smart HTTP (git http-backend), as a file path, and
// over OpenSSH's sshd (AcceptEnv GIT_PROTOCOL, as GitHub's).
func TestRefsCostRatio(t *testing.T) {
	if dir := os.Getenv("MEMD_REFS_CHILD"); dir != "" {
		r, err := Open(dir, hostOptions("hosta"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		res, err := r.Sync(context.Background(), RemoteOptions{Timeout: 5 * time.Minute})
		if err != nil || !res.FastForward {
			t.Fatalf("Sync = %+v, %v", res, err)
		}
		// VmHWM: this process's own peak since exec (getrusage's maxrss carries the
		// parent's across fork and exec, and wait4's adds git's).
		fmt.Printf("sync-ns %d\nself-rss %d\n", time.Since(start).Nanoseconds(), vmHWM())
		return
	}
	if os.Getenv("MEMD_LONG") != "1" {
		t.Skip("MEMD_LONG=1: writes 300k refs")
	}
	for _, transport := range []string{"http", "file", "ssh"} {
		var times, rss [2]float64
		for i, n := range []int{10, 300000} {
			// The least of three: the machine is shared, and a run only adds noise.
			times[i], rss[i] = refsSyncCost(t, n, transport)
			for range 2 {
				tm, rs := refsSyncCost(t, n, transport)
				times[i], rss[i] = min(times[i], tm), min(rss[i], rs)
			}
			t.Logf("%s, %d refs: sync %.0f ms, peak RSS %.1f MiB", transport, n, times[i]/1e6, rss[i]/(1<<20))
		}
		t.Logf("%s: 300k/10 refs: time %.2fx, RSS %.2fx", transport, times[1]/times[0], rss[1]/rss[0])
		if times[1] > 1.5*times[0] || rss[1] > 1.5*rss[0] {
			t.Errorf("%s: 300k refs cost more than 1.5x of 10 refs", transport)
		}
	}
}

// refsSyncCost makes a remote with n extra refs and one new commit, and returns the time
// (ns) and peak RSS (bytes) of a child's sync that fast-forwards to it.
func refsSyncCost(t *testing.T, n int, transport string) (float64, float64) {
	overHTTP := transport == "http"
	w := newSyncWorld(t, map[string]string{"a.md": "one\n"})
	if overHTTP {
		testutil.RunGit(t, w.bare, "config", "http.receivepack", "true")
	}
	head := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	// packed-refs written directly: 300k loose refs would take minutes to create.
	f, err := os.Create(filepath.Join(w.bare, "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	fmt.Fprintln(bw, "# pack-refs with: peeled fully-peeled sorted ")
	fmt.Fprintf(bw, "%s refs/heads/main\n", head)
	for i := range n {
		fmt.Fprintf(bw, "%s refs/pull/%07d/head\n", head, i)
	}
	bw.Flush()
	f.Close()
	testutil.WriteFile(t, w.bDir, "b.md", "two\n")
	mustCommit(t, w.b, "b.md")
	mustSync(t, w.b)
	if overHTTP {
		srv := newTestHTTP(t, filepath.Dir(w.bare))
		testutil.RunGit(t, w.aDir, "remote", "set-url", "origin", srv.URL(filepath.Base(w.bare)))
	}
	env := append(os.Environ(), "MEMD_REFS_CHILD="+w.aDir)
	if transport == "ssh" {
		env = append(env, refsSSHRemote(t, w)...)
	}
	w.a.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRefsCostRatio$", "-test.count=1")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var ns, rss float64
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "sync-ns "); ok {
			fmt.Sscan(v, &ns)
		}
		if v, ok := strings.CutPrefix(l, "self-rss "); ok {
			fmt.Sscan(v, &rss)
		}
	}
	return ns, rss
}

// refsSSHRemote serves w's remote over sshd to a (its origin becomes an ssh alias) and
// returns the child's environment: a HOME whose ~/.ssh names the key and the host.
func refsSSHRemote(t *testing.T, w *syncWorld) []string {
	home := t.TempDir()
	key := filepath.Join(home, ".ssh", "id_ed25519")
	srv := testutil.NewSSHServer(t, testutil.SSHKeygen(t, key, ""))
	testutil.WriteFile(t, home, ".ssh/known_hosts", srv.KnownHostsLine()+"\n")
	testutil.WriteFile(t, home, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n",
		srv.Host, srv.Port, srv.User, key))
	testutil.RunGit(t, w.aDir, "remote", "set-url", "origin", "mem:"+w.bare)
	return []string{"HOME=" + home, "SSH_AUTH_SOCK=", "XDG_RUNTIME_DIR=" + home}
}

// vmHWM is /proc/self/status VmHWM in bytes (0 when unreadable).
func vmHWM() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}
