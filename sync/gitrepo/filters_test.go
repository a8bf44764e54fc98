package gitrepo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

func needTool(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (apt-get install %s)", tool, tool)
		}
	}
}

const cryptAttrs = "secret/** filter=git-crypt diff=git-crypt\nmemory.jsonl filter=git-crypt diff=git-crypt\n"

// newCryptWorld is a sync world whose remote was set up with git-crypt by plain git (a
// symmetric key), both clones unlocked with that key.
func newCryptWorld(t *testing.T) *syncWorld {
	t.Helper()
	needTool(t, "git-crypt")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	w := &syncWorld{bare: filepath.Join(t.TempDir(), "remote.git")}
	testutil.RunGit(t, filepath.Dir(w.bare), "init", "-q", "--bare", "-b", "main", w.bare)
	seed := newGitDir(t)
	key := filepath.Join(t.TempDir(), "key")
	runIn(t, seed, "git-crypt", "init")
	runIn(t, seed, "git-crypt", "export-key", key)
	testutil.WriteFile(t, seed, ".gitattributes", cryptAttrs)
	testutil.WriteFile(t, seed, "secret/a.md", "first secret\n")
	testutil.WriteFile(t, seed, "memory.jsonl", recA+"\n")
	testutil.WriteFile(t, seed, "plain.md", "open\n")
	testutil.RunGit(t, seed, "add", "-A")
	testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, seed, "push", "-q", w.bare, "main")
	w.aDir = filepath.Join(t.TempDir(), "a")
	w.bDir = filepath.Join(t.TempDir(), "b")
	for _, d := range []string{w.aDir, w.bDir} {
		testutil.RunGit(t, filepath.Dir(d), "clone", "-q", w.bare, d)
		runIn(t, d, "git-crypt", "unlock", key)
	}
	w.a = openTest(t, w.aDir, hostOptions("hosta"))
	w.b = openTest(t, w.bDir, hostOptions("hostb"))
	return w
}

func runIn(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir, c.Env = dir, testutil.GitEnv()
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// allObjects is every object of the repo at dir, contents concatenated.
func allObjects(t *testing.T, dir string) string {
	t.Helper()
	return testutil.RunGit(t, dir, "cat-file", "--batch-all-objects", "--batch")
}

// TestGitCryptBothWays: memd's commits of secret files and ledger records reach the remote
// encrypted (no object holds the marker), the other clone's work tree gets plaintext, a
// ledger record added on each side concurrently is kept on both, git status is clean.
func TestGitCryptBothWays(t *testing.T) {
	w := newCryptWorld(t)
	const marker = "MARKER-7f3a9-plaintext"
	testutil.WriteFile(t, w.aDir, "secret/a.md", "first secret\n"+marker+"\n")
	testutil.WriteFile(t, w.aDir, "secret/new.md", "new "+marker+"\n")
	testutil.WriteFile(t, w.aDir, "memory.jsonl", recA+"\n"+recD+"\n")
	mustCommit(t, w.a, "secret/a.md", "secret/new.md", "memory.jsonl")
	testutil.WriteFile(t, w.bDir, "memory.jsonl", recA+"\n"+recE+"\n")
	mustCommit(t, w.b, "memory.jsonl")
	_, rb := w.syncAll(t)
	if len(rb.Conflicts) != 0 {
		t.Errorf("ledger merge made conflict copies %v", rb.Conflicts)
	}
	objs := allObjects(t, w.bare)
	for _, plain := range []string{marker, `"id":"d"`, `"id":"e"`, "first secret"} {
		if strings.Contains(objs, plain) {
			t.Errorf("the remote holds %q in plaintext", plain)
		}
	}
	if !strings.Contains(objs, "\x00GITCRYPT") {
		t.Error("no git-crypt ciphertext in the remote")
	}
	if got := readWork(t, w.bDir, "secret/new.md"); got != "new "+marker+"\n" {
		t.Errorf("b's work tree has %q, want the plaintext", got)
	}
	for _, d := range []string{w.aDir, w.bDir} {
		got := readWork(t, d, "memory.jsonl")
		for _, rec := range []string{recA, recD, recE} {
			if strings.Count(got, rec) != 1 {
				t.Errorf("%s: ledger misses or repeats %s:\n%q", d, rec, got)
			}
		}
	}
	w.check(t)
	// Plain git in the same clone agrees: what memd committed is what git would.
	if out := testutil.RunGit(t, w.bDir, "diff", "HEAD", "--stat"); out != "" {
		t.Errorf("git diff HEAD in b: %s", out)
	}
}

// TestFilterRequiredFailsHolds: a required filter that fails holds the path (reason
// filter, the driver named): nothing is committed, HEAD keeps its version.
func TestFilterRequiredFailsHolds(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, ".gitattributes", "*.sec filter=broken\n")
	testutil.WriteFile(t, dir, "ok.md", "fine\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, dir, "config", "filter.broken.clean", "echo 'no key here' >&2; exit 1")
	testutil.RunGit(t, dir, "config", "filter.broken.smudge", "cat")
	testutil.RunGit(t, dir, "config", "filter.broken.required", "true")
	r := openTest(t, dir, testOptions())
	head := testutil.RunGit(t, dir, "rev-parse", "HEAD")
	testutil.WriteFile(t, dir, "x.sec", "plaintext that must not be stored\n")
	res := mustCommit(t, r, "x.sec")
	if got := testutil.RunGit(t, dir, "rev-parse", "HEAD"); got != head || res.Hash != "" {
		t.Fatalf("a commit was made (%s) for a path whose required filter fails", res.Hash)
	}
	if strings.Contains(allObjects(t, dir), "must not be stored") {
		t.Error("the raw bytes were written as an object")
	}
	held := r.HeldFilters()
	if len(held) != 1 || held[0] != (HeldFilter{Path: "x.sec", Driver: "broken"}) {
		t.Errorf("HeldFilters = %+v", held)
	}
	// Fixed: the next commit takes it through the filter, and it is no longer held.
	testutil.RunGit(t, dir, "config", "filter.broken.clean", "tr a-z A-Z")
	mustCommit(t, r, "x.sec")
	if got := testutil.RunGit(t, dir, "cat-file", "blob", "HEAD:x.sec"); got != "PLAINTEXT THAT MUST NOT BE STORED\n" {
		t.Errorf("committed %q", got)
	}
	if held := r.HeldFilters(); len(held) != 0 {
		t.Errorf("still held: %+v", held)
	}
}

// TestCRLFUnderEOLLF: a memory saved with CRLF under `eol=lf` is committed with LF, as
// `git add` does, and git status stays clean.
func TestCRLFUnderEOLLF(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, ".gitattributes", "*.html text eol=lf\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "seed")
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "m.html", "<p>one</p>\r\n<p>two</p>\r\n")
	mustCommit(t, r, "m.html")
	if got := testutil.RunGit(t, dir, "cat-file", "blob", "HEAD:m.html"); got != "<p>one</p>\n<p>two</p>\n" {
		t.Errorf("committed %q, git add stores LF", got)
	}
	want := strings.TrimSpace(testutil.RunGit(t, dir, "hash-object", "m.html"))
	if got := strings.Fields(lsTree(t, dir)["m.html"])[1]; got != want {
		t.Errorf("blob %s, git hash-object %s", got, want)
	}
	statusClean(t, r)
}

// TestLockedGitCrypt: a clone not unlocked holds ciphertext; memd commits nothing for it
// (git status shows nothing) and a new file there is held, never stored as plaintext.
func TestLockedGitCrypt(t *testing.T) {
	w := newCryptWorld(t)
	locked := filepath.Join(t.TempDir(), "locked")
	testutil.RunGit(t, filepath.Dir(locked), "clone", "-q", w.bare, locked)
	b, _ := os.ReadFile(filepath.Join(locked, "secret", "a.md"))
	if !strings.HasPrefix(string(b), "\x00GITCRYPT") {
		t.Fatalf("the locked clone holds %q, want ciphertext", b)
	}
	r := openTest(t, locked, testOptions())
	head := testutil.RunGit(t, locked, "rev-parse", "HEAD")
	res := mustCommit(t, r, "secret/a.md", "memory.jsonl")
	if res.Hash != "" {
		t.Errorf("commit %s in a locked repo", res.Hash)
	}
	testutil.WriteFile(t, locked, "secret/b.md", "would be plaintext\n")
	mustCommit(t, r, "secret/b.md")
	if got := testutil.RunGit(t, locked, "rev-parse", "HEAD"); got != head {
		t.Error("a new secret file was committed in a locked repo")
	}
	if held := r.HeldFilters(); len(held) != 1 || held[0].Path != "secret/b.md" || held[0].Driver != "git-crypt" {
		t.Errorf("HeldFilters = %+v", held)
	}
	os.Remove(filepath.Join(locked, "secret", "b.md"))
	statusClean(t, r)
}

// TestGitLFSCommitAndCheckout: memd commits the pointer git-lfs's filter makes (what
// `git add` stores), and the other clone's checkout writes the real bytes through
// `git lfs filter-process`, fetched from the file:// remote (the upload is the pre-push
// hook's; the test runs `git lfs push` as that hook would).
func TestGitLFSCommitAndCheckout(t *testing.T) {
	needTool(t, "git-lfs")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	w := &syncWorld{bare: filepath.Join(t.TempDir(), "remote.git")}
	testutil.RunGit(t, filepath.Dir(w.bare), "init", "-q", "--bare", "-b", "main", w.bare)
	seed := newGitDir(t)
	testutil.WriteFile(t, seed, ".gitattributes", "*.png filter=lfs diff=lfs merge=lfs -text\n")
	testutil.RunGit(t, seed, "add", "-A")
	testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, seed, "push", "-q", w.bare, "main")
	w.aDir, w.bDir = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{w.aDir, w.bDir} {
		testutil.RunGit(t, filepath.Dir(d), "clone", "-q", w.bare, d)
		testutil.RunGit(t, d, "lfs", "install", "--local")
	}
	w.a = openTest(t, w.aDir, hostOptions("hosta"))
	w.b = openTest(t, w.bDir, hostOptions("hostb"))
	img := make([]byte, 300<<10)
	for i := range img {
		img[i] = byte(i*7 + i/251)
	}
	if err := os.MkdirAll(filepath.Join(w.aDir, "pics"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.aDir, "pics", "a.png"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, w.a, "pics/a.png")
	ptr := testutil.RunGit(t, w.aDir, "cat-file", "blob", "HEAD:pics/a.png")
	if !strings.HasPrefix(ptr, "version https://git-lfs.github.com/spec/v1") || len(ptr) > 200 {
		t.Fatalf("committed %d bytes, not a pointer: %.80q", len(ptr), ptr)
	}
	want := strings.TrimSpace(testutil.RunGit(t, w.aDir, "hash-object", "pics/a.png"))
	if got := strings.Fields(lsTree(t, w.aDir)["pics/a.png"])[1]; got != want {
		t.Errorf("blob %s, git hash-object %s", got, want)
	}
	mustSync(t, w.a)
	testutil.RunGit(t, w.aDir, "lfs", "push", "--all", "origin", "main")
	mustSync(t, w.b)
	got, err := os.ReadFile(filepath.Join(w.bDir, "pics", "a.png"))
	if err != nil || string(got) != string(img) {
		t.Fatalf("b's work tree has %d bytes (%v), want the %d-byte image", len(got), err, len(img))
	}
	w.check(t)
}

// TestCheckFilters: doctor's look names the drivers in use, finds a blob committed before
// its eol rule (what an older memd would have stored), and a locked git-crypt clone.
func TestCheckFilters(t *testing.T) {
	w := newCryptWorld(t)
	fc, err := CheckFilters(w.aDir)
	if err != nil || len(fc.Drivers) != 1 || fc.Drivers[0] != "git-crypt" || len(fc.Differ) != 0 || len(fc.Locked) != 0 {
		t.Errorf("unlocked clone: %+v, %v", fc, err)
	}
	locked := filepath.Join(t.TempDir(), "locked")
	testutil.RunGit(t, filepath.Dir(locked), "clone", "-q", w.bare, locked)
	if fc, err := CheckFilters(locked); err != nil || len(fc.Locked) != 2 || !LockedGitCrypt(locked, fc.Locked[0]) {
		t.Errorf("locked clone: %+v, %v", fc, err)
	}
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "m.html", "a\r\nb\r\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "crlf")
	testutil.WriteFile(t, dir, ".gitattributes", "*.html text eol=lf\n")
	testutil.RunGit(t, dir, "add", ".gitattributes")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "attrs")
	fc, err = CheckFilters(dir)
	if err != nil || len(fc.Differ) != 1 || fc.Differ[0] != (FilterDiffer{Path: "m.html"}) {
		t.Errorf("CRLF blob under eol=lf: %+v, %v", fc, err)
	}
}

// TestRestoreThroughGitCrypt: a restored secret is written as plaintext and committed
// encrypted, and git status stays clean.
func TestRestoreThroughGitCrypt(t *testing.T) {
	w := newCryptWorld(t)
	head := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD"))
	testutil.WriteFile(t, w.aDir, "secret/a.md", "changed\n")
	mustCommit(t, w.a, "secret/a.md")
	v, err := w.a.History().VersionAt("secret/a.md", head)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.a.History().Restore("secret/a.md", v); err != nil {
		t.Fatal(err)
	}
	if got := readWork(t, w.aDir, "secret/a.md"); got != "first secret\n" {
		t.Errorf("restored %q", got)
	}
	if blob := testutil.RunGit(t, w.aDir, "cat-file", "blob", "HEAD:secret/a.md"); !strings.HasPrefix(blob, "\x00GITCRYPT") {
		t.Errorf("restore committed %q, want ciphertext", blob)
	}
	statusClean(t, w.a)
}

// BenchmarkFiltersFastPath: what a commit pays for the filters in a repo with none: one
// filtersBegin (the config stamp, the outer attribute files) and one conv per path.
func BenchmarkFiltersFastPath(b *testing.B) {
	dir := b.TempDir()
	testutil.RunGit(b, dir, "init", "-q", "-b", "main")
	r, err := Open(dir, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	r.filters.begin(nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.filters.begin(nil)
		if !r.filters.conv("areas/d07/m0007.html").Identity() {
			b.Fatal("not identity")
		}
	}
}

// TestGitCryptConflictCopy: one encrypted memory edited on both machines: the conflict
// copy is encrypted on the remote like the memory, and plaintext in both work trees.
func TestGitCryptConflictCopy(t *testing.T) {
	w := newCryptWorld(t)
	const mA, mB = "MARKER-side-a-51", "MARKER-side-b-52"
	testutil.WriteFile(t, w.aDir, "secret/a.md", "first secret\n"+mA+"\n")
	mustCommit(t, w.a, "secret/a.md")
	testutil.WriteFile(t, w.bDir, "secret/a.md", "first secret\n"+mB+"\n")
	mustCommit(t, w.b, "secret/a.md")
	w.syncAll(t)
	objs := allObjects(t, w.bare)
	for _, m := range []string{mA, mB} {
		if strings.Contains(objs, m) {
			t.Errorf("the remote holds %s in plaintext", m)
		}
	}
	for _, d := range []string{w.aDir, w.bDir} {
		copies := conflictCopies(t, d)
		if len(copies) != 1 {
			t.Fatalf("%s: conflict copies %v, want 1", d, copies)
		}
		both := readWork(t, d, "secret/a.md") + readWork(t, d, copies[0])
		if !strings.Contains(both, mA) || !strings.Contains(both, mB) {
			t.Errorf("%s: the memory and its copy hold %q, want both sides in plaintext", d, both)
		}
	}
	w.check(t)
}
