package gitrepo

// Remotes through git's remote helpers, with the real git-remote-gcrypt and gnupg: a key
// made in the test, a gcrypt remote on a local bare repo, plain git in the same HOME as the
// reference, two clones driven by memd.

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memd-dev/memd/internal/gitpath"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

// gcryptWorld is one user's HOME with a gpg key, a bare repo reached as gcrypt::<path>, and
// a clone (a) seeded and pushed by plain git.
type gcryptWorld struct {
	home, bare, aDir string
	fpr              string
	git              testutil.Git
}

func newGcryptWorld(t *testing.T) *gcryptWorld {
	t.Helper()
	for _, tool := range []string{"git-remote-gcrypt", "gpg", "gpgconf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (apt-get install git-remote-gcrypt gnupg; .ci/run installs them)", tool)
		}
	}
	root := t.TempDir()
	w := &gcryptWorld{home: filepath.Join(root, "home"), bare: filepath.Join(root, "remote.git"), aDir: filepath.Join(root, "a")}
	gnupg := filepath.Join(w.home, ".gnupg")
	if err := os.MkdirAll(gnupg, 0o700); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.home, ".gitconfig", "[user]\n\tname = t\n\temail = t@t\n")
	for k, v := range map[string]string{"HOME": w.home, "GNUPGHOME": gnupg, "GIT_CONFIG_GLOBAL": filepath.Join(w.home, ".gitconfig"),
		"GIT_CONFIG_NOSYSTEM": "1", "XDG_CONFIG_HOME": filepath.Join(w.home, ".config")} {
		t.Setenv(k, v)
	}
	w.git = testutil.Git{Env: append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")}
	t.Cleanup(func() { _ = exec.Command("gpgconf", "--kill", "all").Run() }) // the agent gpg started
	gpg := exec.Command("gpg", "--batch", "--passphrase", "", "--quick-gen-key", "memd test <memd@test.invalid>", "future-default", "default", "never")
	if out, err := gpg.CombinedOutput(); err != nil {
		t.Fatalf("gpg --quick-gen-key: %v\n%s", err, out)
	}
	out, err := exec.Command("gpg", "--batch", "--list-keys", "--with-colons").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, ":"); len(f) > 9 && f[0] == "fpr" && w.fpr == "" {
			w.fpr = f[9]
		}
	}
	w.mustGit(t, root, "init", "-q", "--bare", "-b", "main", w.bare)
	w.mustGit(t, root, "init", "-q", "-b", "main", w.aDir)
	testutil.WriteFile(t, w.aDir, "memory.jsonl", recA+"\n")
	w.mustGit(t, w.aDir, "add", "-A")
	w.mustGit(t, w.aDir, "commit", "-q", "-m", "seed")
	w.addRemote(t, w.aDir)
	w.mustGit(t, w.aDir, "push", "-q", "origin", "main") // the reference: git pushes through gcrypt
	return w
}

func (w *gcryptWorld) mustGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := w.git.Run(dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gitStdin is mustGit with stdin.
func (w *gcryptWorld) gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, w.git.Env, strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// addRemote points origin of the repo at dir at the gcrypt remote, encrypted to the key.
func (w *gcryptWorld) addRemote(t *testing.T, dir string) {
	t.Helper()
	w.mustGit(t, dir, "remote", "add", "origin", "gcrypt::"+w.bare)
	w.mustGit(t, dir, "config", "remote.origin.gcrypt-participants", w.fpr)
}

// countLookups makes every DNS lookup of this process go through a counter (the Go
// resolver, whose Dial is the only way out), for the rest of the test.
func countLookups(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	res := net.DefaultResolver
	preferGo, dial := res.PreferGo, res.Dial
	res.PreferGo = true
	res.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		n.Add(1)
		return nil, errors.New("no DNS in this test")
	}
	t.Cleanup(func() { res.PreferGo, res.Dial = preferGo, dial })
	return &n
}

// holdsMarker reports whether any file under dir holds marker, as stored or inside any zlib
// stream (git's loose objects and the objects of a pack are deflated).
func holdsMarker(t *testing.T, dir, marker string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		found = bytes.Contains(b, []byte(marker)) || inflatedHolds(b, marker)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func inflatedHolds(b []byte, marker string) bool {
	for i := 0; i+2 < len(b); i++ {
		if b[i] != 0x78 || (uint16(b[i])<<8|uint16(b[i+1]))%31 != 0 {
			continue
		}
		zr, err := zlib.NewReader(bytes.NewReader(b[i:]))
		if err != nil {
			continue
		}
		out, _ := io.ReadAll(io.LimitReader(zr, 1<<20))
		if bytes.Contains(out, []byte(marker)) {
			return true
		}
	}
	return false
}

func TestGcryptRemoteBothWays(t *testing.T) {
	w := newGcryptWorld(t)
	// B: a clone made by plain git, the branch as git's own fetch brings it.
	bDir := filepath.Join(filepath.Dir(w.aDir), "b")
	w.mustGit(t, filepath.Dir(bDir), "init", "-q", "-b", "main", bDir)
	w.addRemote(t, bDir)
	w.mustGit(t, bDir, "pull", "-q", "origin", "main")
	lookups := countLookups(t)
	a := openTest(t, w.aDir, hostOptions("hosta"))
	b := openTest(t, bDir, hostOptions("hostb"))
	if h := a.RemoteHelper(RemoteOptions{}); h != "gcrypt" {
		t.Fatalf("RemoteHelper = %q, want gcrypt", h)
	}
	const marker = "SECRET-MARKER-5f1c2a"
	// A's memory reaches B.
	testutil.WriteFile(t, w.aDir, "areas/secret/from-a.html", "<p>"+marker+" from A</p>\n")
	mustCommit(t, a, "areas/secret/from-a.html")
	if res := mustSync(t, a); !res.Pushed {
		t.Fatalf("A did not push: %+v", res)
	}
	if res := mustSync(t, b); !res.FastForward {
		t.Fatalf("B did not fast-forward: %+v", res)
	}
	if got := readWork(t, bDir, "areas/secret/from-a.html"); !strings.Contains(got, marker) {
		t.Fatalf("B holds %q", got)
	}
	// B's reaches A.
	testutil.WriteFile(t, bDir, "areas/secret/from-b.html", "<p>from B</p>\n")
	mustCommit(t, b, "areas/secret/from-b.html")
	mustSync(t, b)
	mustSync(t, a)
	readWork(t, w.aDir, "areas/secret/from-b.html")
	// Written on both before either synced: both kept, the ledger merged by record.
	testutil.WriteFile(t, w.aDir, "areas/x/a2.html", "<p>a2</p>\n")
	testutil.WriteFile(t, w.aDir, "memory.jsonl", recA+"\n"+recD+"\n")
	mustCommit(t, a, "areas/x/a2.html", "memory.jsonl")
	testutil.WriteFile(t, bDir, "areas/x/b2.html", "<p>b2</p>\n")
	testutil.WriteFile(t, bDir, "memory.jsonl", recA+"\n"+recE+"\n")
	mustCommit(t, b, "areas/x/b2.html", "memory.jsonl")
	mustSync(t, a)
	if res := mustSync(t, b); !res.Merged || !res.Pushed {
		t.Fatalf("B did not merge and push: %+v", res)
	}
	mustSync(t, a)
	for _, d := range []string{w.aDir, bDir} {
		readWork(t, d, "areas/x/a2.html")
		readWork(t, d, "areas/x/b2.html")
		if l := readWork(t, d, "memory.jsonl"); !strings.Contains(l, recD) || !strings.Contains(l, recE) {
			t.Errorf("%s: ledger lost a record:\n%s", d, l)
		}
	}
	// A push that loses the race (A pushed between B's fetch and B's push) is refused, not
	// forced: B fetches, merges and pushes again, in the same sync.
	testutil.WriteFile(t, bDir, "areas/x/b3.html", "<p>b3</p>\n")
	mustCommit(t, b, "areas/x/b3.html")
	raced := false
	b.setCrashHooks(&crashHooks{afterPlan: func() {
		if raced {
			return
		}
		raced = true
		testutil.WriteFile(t, w.aDir, "areas/x/a3.html", "<p>a3</p>\n")
		mustCommit(t, a, "areas/x/a3.html")
		mustSync(t, a)
	}})
	if res := mustSync(t, b); res.Rounds != 2 || !res.Merged || !res.Pushed {
		t.Fatalf("B's raced sync: %+v, want a lost round, a merge and a push", res)
	}
	b.setCrashHooks(nil)
	mustSync(t, a)
	for _, d := range []string{w.aDir, bDir} {
		readWork(t, d, "areas/x/a3.html")
		readWork(t, d, "areas/x/b3.html")
	}
	// The look (ls-remote through the helper) and plain git agree with both clones.
	head := strings.TrimSpace(w.mustGit(t, w.aDir, "rev-parse", "HEAD"))
	looked, err := b.RemoteHead(context.Background(), RemoteOptions{})
	if err != nil || looked.String() != head {
		t.Fatalf("RemoteHead = %s, %v; want %s", looked, err, head)
	}
	if hb := strings.TrimSpace(w.mustGit(t, bDir, "rev-parse", "HEAD")); hb != head {
		t.Fatalf("heads differ: a %s b %s", head, hb)
	}
	if ls := w.mustGit(t, bDir, "ls-remote", "origin", "refs/heads/main"); !strings.HasPrefix(ls, head) {
		t.Fatalf("git ls-remote says %q, memd's head is %s", ls, head)
	}
	for _, r := range []*Repo{a, b} {
		statusClean(t, r)
		fsck(t, r.Dir())
	}
	// gcrypt encrypts: the remote holds no plaintext, where a clone's objects do.
	if holdsMarker(t, w.bare, marker) {
		t.Fatal("the gcrypt remote holds the plaintext marker")
	}
	if !holdsMarker(t, filepath.Join(w.aDir, ".git", "objects"), marker) {
		t.Fatal("the marker scan does not find the marker in A's own objects: it proves nothing")
	}
	// No DNS lookup (of "gcrypt" or anything): memd's dialers were never reached.
	if n := lookups.Load(); n != 0 {
		t.Fatalf("%d DNS lookups during the syncs", n)
	}
	if _, err := net.DefaultResolver.LookupHost(context.Background(), "gcrypt"); err == nil || lookups.Load() == 0 {
		t.Fatalf("the lookup counter does not see a lookup of gcrypt (err %v): it proves nothing", err)
	}
	// What git fetched through the helper passes the tree checks before anything is merged
	// or checked out: a commit with a `.GIT` entry, pushed by plain git, is refused.
	blob := strings.TrimSpace(w.gitStdin(t, w.aDir, "<p>evil</p>\n", "hash-object", "-w", "--stdin"))
	tree := strings.TrimSpace(w.gitStdin(t, w.aDir, "100644 blob "+blob+"\t.GIT\n", "mktree"))
	evil := strings.TrimSpace(w.mustGit(t, w.aDir, "commit-tree", tree, "-p", head, "-m", "evil"))
	w.mustGit(t, w.aDir, "push", "-q", "origin", evil+":refs/heads/main")
	_, err = b.Sync(context.Background(), pushOpts())
	if !errors.Is(err, gitpath.ErrUnsafeTree) {
		t.Fatalf("Sync of a .GIT entry through the helper: %v, want gitpath.ErrUnsafeTree", err)
	}
	if hb := strings.TrimSpace(w.mustGit(t, bDir, "rev-parse", "HEAD")); hb != head {
		t.Fatalf("B's HEAD moved to %s", hb)
	}
	if _, err := os.Lstat(filepath.Join(bDir, ".GIT")); err == nil {
		t.Fatal("B's work tree holds the .GIT entry")
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

func TestGcryptRemoteUnreachableIsOffline(t *testing.T) {
	if _, err := exec.LookPath("git-remote-gcrypt"); err != nil {
		t.Fatal("git-remote-gcrypt not found (apt-get install git-remote-gcrypt; .ci/run installs it)")
	}
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "x.html", "<p>x</p>\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "x")
	url := "gcrypt::http://memd:s3cret-token@127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/r.git"
	testutil.RunGit(t, dir, "remote", "add", "origin", url)
	// Reached before (gcrypt keeps the id), so gcrypt knows it is missing, not new: nothing
	// is encrypted before the failure, so no key is needed.
	testutil.RunGit(t, dir, "config", "remote.origin.gcrypt-id", ":id:memdtest")
	a := openTest(t, dir, hostOptions("hosta"))
	_, err := a.Sync(context.Background(), pushOpts())
	if !errors.Is(err, gitremote.ErrOffline) {
		t.Fatalf("Sync: %v, want offline", err)
	}
	for _, want := range []string{"git-remote-gcrypt", "Couldn't connect to server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "s3cret-token") {
		t.Errorf("error shows the URL's password: %q", err)
	}
	if _, err := a.RemoteHead(context.Background(), RemoteOptions{}); !errors.Is(err, gitremote.ErrOffline) {
		t.Fatalf("RemoteHead: %v, want offline", err)
	}
}

func TestGcryptRemoteFailingIsError(t *testing.T) {
	w := newGcryptWorld(t)
	a := openTest(t, w.aDir, hostOptions("hosta"))
	testutil.WriteFile(t, w.aDir, "areas/x/n.html", "<p>n</p>\n")
	mustCommit(t, a, "areas/x/n.html")
	// A keyring without the key: gcrypt cannot decrypt the remote's manifest.
	empty := filepath.Join(t.TempDir(), "gnupg")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GNUPGHOME", empty)
	t.Cleanup(func() { _ = exec.Command("gpgconf", "--kill", "all").Run() })
	// The reference: what plain git in the same HOME says last.
	_, refErr := w.git.Run(w.aDir, []string{"GNUPGHOME=" + empty}, "fetch", "origin")
	if refErr == nil {
		t.Fatal("plain git fetched without the key")
	}
	lines := strings.Split(strings.TrimSpace(refErr.Error()), "\n")
	said := strings.TrimSpace(lines[len(lines)-1])
	_, err := a.Sync(context.Background(), pushOpts())
	if err == nil || errors.Is(err, gitremote.ErrOffline) {
		t.Fatalf("Sync: %v, want an error that is not offline", err)
	}
	if !strings.Contains(err.Error(), said) || !strings.Contains(err.Error(), "git-remote-gcrypt") {
		t.Errorf("error %q does not carry the helper's words %q", err, said)
	}
}

func TestRemoteHelperMissingIsError(t *testing.T) {
	for name, cfg := range map[string][]string{
		"url": {"remote.origin.url", "nosuch::/tmp/memd-no-such-place"},
		"vcs": {"remote.origin.vcs", "nosuch"}, // beside a URL: git 2.39 crashes on a vcs remote without one
	} {
		t.Run(name, func(t *testing.T) {
			dir := newGitDir(t)
			testutil.WriteFile(t, dir, "x.html", "<p>x</p>\n")
			testutil.RunGit(t, dir, "add", "-A")
			testutil.RunGit(t, dir, "commit", "-q", "-m", "x")
			testutil.RunGit(t, dir, "config", "remote.origin.url", "/tmp/memd-no-such-place")
			testutil.RunGit(t, dir, "config", cfg[0], cfg[1])
			r := openTest(t, dir, testOptions())
			if ok, err := r.HasRemote(""); !ok || err != nil {
				t.Fatalf("HasRemote = %v, %v", ok, err)
			}
			_, err := r.Sync(context.Background(), pushOpts())
			if err == nil || errors.Is(err, gitremote.ErrOffline) || !strings.Contains(err.Error(), "git-remote-nosuch is not installed") {
				t.Fatalf("Sync: %v, want an error naming git-remote-nosuch", err)
			}
		})
	}
}
