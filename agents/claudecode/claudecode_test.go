package claudecode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/testutil"
)

func TestNormalizeRemote(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"git@github.com:acme/widget.git", "github.com/acme/widget"},
		{"https://github.com/acme/widget.git", "github.com/acme/widget"},
		{"https://user:tok@GitHub.COM:443/acme/widget/", "github.com/acme/widget"},
		{"ssh://git@github.com:22/acme/widget.git", "github.com/acme/widget"},
		{"git://github.com/acme/widget", "github.com/acme/widget"},
		{"gcrypt::git@github.com:acme/widget.git", "github.com/acme/widget"},
		{"https://gitlab.com/g/sub/repo.git", "gitlab.com/g/sub/repo"},
		{"/srv/git/widget.git", ""},
		{"file:///srv/git/widget.git", ""},
		{"../widget", ""},
		{"https://evil.com/../../etc", ""},
		{"https://evil.com/.git/x", ""},
		{"https://github.com", ""},
		{"git@host:a/\x1bb", ""},
	} {
		got, ok := NormalizeRemote(c.in)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("NormalizeRemote(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
}

func TestProjectIDFromRealGit(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	testutil.RunGit(t, dir, "init", "-q", none)
	if _, err := ProjectID(none); err == nil {
		t.Fatal("a repo with no origin and no commit got an id")
	}
	testutil.WriteFile(t, none, "a", "a")
	testutil.RunGit(t, none, "add", "a")
	testutil.RunGit(t, none, "commit", "-qm", "a")
	root := strings.TrimSpace(testutil.RunGit(t, none, "rev-list", "--max-parents=0", "HEAD"))
	if id, err := ProjectID(none); err != nil || id != "root-"+root[:12] {
		t.Fatalf("ProjectID without origin = %q, %v; want root-%s", id, err, root[:12])
	}
	testutil.RunGit(t, none, "remote", "add", "origin", "git@github.com:Acme/widget.git")
	sub := filepath.Join(none, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	top, err := Toplevel(sub)
	if err != nil || top != none {
		t.Fatalf("Toplevel(sub) = %q, %v", top, err)
	}
	if id, err := ProjectID(none); err != nil || id != "github.com/Acme/widget" {
		t.Fatalf("ProjectID = %q, %v", id, err)
	}
}

func TestShared(t *testing.T) {
	in := "---\nname: fact\ndescription: a fact\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: 430bb126-de69-4bda-8f65-82fa397e10d3\n  modified: 2026-12-06T15:56:01.239Z\n---\n\nthe fact\noriginSessionId: body text stays\n"
	want := "---\nname: fact\ndescription: a fact\nmetadata:\n  node_type: memory\n  type: user\n  modified: 2026-12-06T15:56:01.239Z\n---\n\nthe fact\noriginSessionId: body text stays\n"
	if got := string(Shared([]byte(in))); got != want {
		t.Fatalf("Shared:\n%s\nwant\n%s", got, want)
	}
	for _, keep := range []string{"no front matter\noriginSessionId: x\n", "---\noriginSessionId: x\nno end\n", ""} {
		if got := string(Shared([]byte(keep))); got != keep {
			t.Fatalf("Shared(%q) = %q, want it unchanged", keep, got)
		}
	}
}

func TestDirNameAndCandidates(t *testing.T) {
	if n, ok := DirName("/tmp/cmexp/proj.x_y"); !ok || n != "-tmp-cmexp-proj-x-y" {
		t.Fatalf("DirName = %q, %v", n, ok)
	}
	if _, ok := DirName("/" + strings.Repeat("a", 250)); ok {
		t.Fatal("a path over 200 characters got a computed name")
	}
	home, cfg := t.TempDir(), t.TempDir()
	rec, listed, root := t.TempDir(), t.TempDir(), t.TempDir()
	name, _ := DirName(rec)
	testutil.WriteFile(t, filepath.Join(cfg, "projects", name), "s.jsonl",
		`{"type":"queue-operation"}`+"\n"+`{"type":"user","cwd":"`+rec+`","sessionId":"s"}`+"\n")
	testutil.WriteFile(t, home, ".claude.json", `{"projects":{"`+listed+`":{}}}`)
	testutil.RunGit(t, root, "init", "-q", "widget")
	if err := os.Mkdir(filepath.Join(root, "not-a-repo"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := Candidates(cfg, home, []string{root})
	for _, want := range []string{rec, listed, root, filepath.Join(root, "widget")} {
		if !contains(got, want) {
			t.Errorf("Candidates lacks %s: %v", want, got)
		}
	}
	if contains(got, filepath.Join(root, "not-a-repo")) {
		t.Errorf("Candidates lists a folder that is not a checkout: %v", got)
	}
}

// TestFinderLearnsALateCwd: a session's transcript names its cwd only after its first lines;
// appending to it leaves the folder's time, and the next pass still finds it.
func TestFinderLearnsALateCwd(t *testing.T) {
	home, cfg, proj := t.TempDir(), t.TempDir(), t.TempDir()
	name, _ := DirName(proj)
	tr := filepath.Join(cfg, "projects", name, "s.jsonl")
	testutil.WriteFile(t, filepath.Dir(tr), "s.jsonl", `{"type":"queue-operation","sessionId":"s"}`+"\n")
	f := newFinder()
	if got := f.candidates(cfg, home, nil); contains(got, proj) {
		t.Fatalf("found %s before the transcript named it: %v", proj, got)
	}
	fh, err := os.OpenFile(tr, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString(`{"type":"user","cwd":"` + proj + `"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	if got := f.candidates(cfg, home, nil); !contains(got, proj) {
		t.Fatalf("the cwd appended later was not found: %v", got)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// machine is one HOME: a Claude Code config dir, a checkout of the project, a memory repo.
type machine struct {
	cfg, project, repo, state string
	s                         *Syncer
}

func newMachine(t *testing.T, host, origin, at string) *machine {
	t.Helper()
	m := &machine{cfg: t.TempDir(), repo: t.TempDir(), state: t.TempDir()}
	m.project = filepath.Join(t.TempDir(), at)
	testutil.RunGit(t, filepath.Dir(m.project), "init", "-q", at)
	testutil.RunGit(t, m.project, "remote", "add", "origin", origin)
	m.s = New(Options{ConfigDir: m.cfg, Home: t.TempDir(), Roots: []string{filepath.Dir(m.project)}, Repo: m.repo,
		StateDir: m.state, Host: host, Now: func() time.Time { return time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC) }})
	return m
}

func (m *machine) memDir(t *testing.T) string {
	d, ok := MemoryDir(m.cfg, m.project)
	if !ok {
		t.Fatal("no memory dir")
	}
	return d
}

func (m *machine) sync(t *testing.T) Report {
	t.Helper()
	r, err := m.s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *Syncer) s2(t *testing.T) Report {
	t.Helper()
	r, err := s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// copyRepo plays the memory repo's sync between two machines: b's agents/ becomes a's.
func copyRepo(t *testing.T, from, to string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(to, "agents")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(to, "agents"), os.DirFS(filepath.Join(from, "agents"))); err != nil {
		t.Fatal(err)
	}
}

const fact = "---\nname: fact\ndescription: a fact\nmetadata:\n  type: user\n  originSessionId: 11111111-2222\n---\n\nthe fact\n"

// TestTwoWayCopy: one project at two paths with two origin spellings; a memory written on A
// reaches B's Claude Code dir without its session id, B's edit and B's removal come back,
// two adds at once keep both files and both index lines, and an edit on both keeps both.
func TestTwoWayCopy(t *testing.T) {
	a := newMachine(t, "alpha", "git@github.com:acme/widget.git", "widget")
	b := newMachine(t, "beta", "https://github.com/acme/widget.git", "clients-widget")
	rel := filepath.Join("agents", "claude-code", "github.com", "acme", "widget")

	testutil.WriteFile(t, a.memDir(t), "fact.md", fact)
	testutil.WriteFile(t, a.memDir(t), "MEMORY.md", "- [Fact](fact.md) — the fact\n")
	testutil.WriteFile(t, a.memDir(t), "s.jsonl", `{"sessionId":"11111111-2222"}`+"\n")
	testutil.WriteFile(t, a.memDir(t), "notes.txt", "not a memory\n")
	if r := a.sync(t); len(r.Synced) != 1 || r.Synced[0].ID != "github.com/acme/widget" || r.Changed != 2 ||
		r.Synced[0].LastMachine != "alpha" || r.Synced[0].LastChange.IsZero() {
		t.Fatalf("A's pass: %+v", r)
	}
	// The last change outlives the Syncer (a restart): it is kept with the bases.
	if r := New(a.s.o).s2(t); r.Synced[0].LastMachine != "alpha" || r.Changed != 0 {
		t.Fatalf("after a restart: %+v", r)
	}
	shared := read(t, filepath.Join(a.repo, rel, "fact.md"))
	if strings.Contains(shared, "11111111") || shared != strings.Replace(fact, "  originSessionId: 11111111-2222\n", "", 1) {
		t.Fatalf("repo copy:\n%s", shared)
	}
	for _, n := range []string{"s.jsonl", "notes.txt"} {
		if _, err := os.Stat(filepath.Join(a.repo, rel, n)); err == nil {
			t.Fatalf("%s was copied into the repo", n)
		}
	}
	copyRepo(t, a.repo, b.repo)
	b.sync(t)
	if got := read(t, filepath.Join(b.memDir(t), "fact.md")); got != shared {
		t.Fatalf("B's Claude Code dir holds\n%s", got)
	}

	// B edits and adds; A adds at the same time.
	testutil.WriteFile(t, b.memDir(t), "fact.md", strings.Replace(shared, "the fact", "the fact, edited on B", 1))
	testutil.WriteFile(t, b.memDir(t), "b.md", "---\nname: b\n---\nfrom B\n")
	testutil.WriteFile(t, b.memDir(t), "MEMORY.md", "- [Fact](fact.md) — the fact\n- [B](b.md) — from B\n")
	testutil.WriteFile(t, a.memDir(t), "a.md", "---\nname: a\n---\nfrom A\n")
	testutil.WriteFile(t, a.memDir(t), "MEMORY.md", "- [Fact](fact.md) — the fact\n- [A](a.md) — from A\n")
	b.sync(t)
	a.sync(t)
	// The repo merge (sync/treemerge's rule for these MEMORY.md files) is played by the copy
	// itself here: B's repo takes A's added file, then A's index against B's.
	testutil.WriteFile(t, b.repo, filepath.Join(rel, "a.md"), read(t, filepath.Join(a.repo, rel, "a.md")))
	merged, err := memorymd.MergeTopicFile([]byte("- [Fact](fact.md) — the fact\n"),
		[]byte(read(t, filepath.Join(b.repo, rel, "MEMORY.md"))), []byte(read(t, filepath.Join(a.repo, rel, "MEMORY.md"))))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, b.repo, filepath.Join(rel, "MEMORY.md"), string(merged))
	b.sync(t)
	copyRepo(t, b.repo, a.repo)
	a.sync(t)
	idx := read(t, filepath.Join(a.memDir(t), "MEMORY.md"))
	for _, want := range []string{"(fact.md)", "(a.md)", "(b.md)"} {
		if !strings.Contains(idx, want) {
			t.Fatalf("A's MEMORY.md lacks %s:\n%s", want, idx)
		}
	}
	if got := read(t, filepath.Join(a.memDir(t), "fact.md")); !strings.Contains(got, "edited on B") {
		t.Fatalf("B's edit did not reach A:\n%s", got)
	}
	if got := read(t, filepath.Join(a.memDir(t), "b.md")); got != "---\nname: b\n---\nfrom B\n" {
		t.Fatalf("b.md on A: %q", got)
	}

	removalTravels(t, a, b, rel)

	// Both sides edit one memory between two passes: the repo's stays, the local one is
	// kept beside it as a conflict copy, in both places.
	testutil.WriteFile(t, b.memDir(t), "a.md", "---\nname: a\n---\nlocal edit\n")
	testutil.WriteFile(t, b.repo, filepath.Join(rel, "a.md"), "---\nname: a\n---\nremote edit\n")
	b.sync(t)
	cp := "a.conflict-beta-20261206T160000Z.md"
	if got := read(t, filepath.Join(b.memDir(t), "a.md")); !strings.Contains(got, "remote edit") {
		t.Fatalf("a.md after an edit on both: %q", got)
	}
	for _, p := range []string{filepath.Join(b.memDir(t), cp), filepath.Join(b.repo, rel, cp)} {
		if got := read(t, p); !strings.Contains(got, "local edit") {
			t.Fatalf("%s: %q", p, got)
		}
	}
}

// removalTravels: A removes b.md from Claude Code's dir; the removal reaches the repo, then B.
func removalTravels(t *testing.T, a, b *machine, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(a.memDir(t), "b.md")); err != nil {
		t.Fatal(err)
	}
	a.sync(t)
	if _, err := os.Stat(filepath.Join(a.repo, rel, "b.md")); err == nil {
		t.Fatal("a removal in Claude Code's dir stayed in the repo")
	}
	copyRepo(t, a.repo, b.repo)
	b.sync(t)
	if _, err := os.Stat(filepath.Join(b.memDir(t), "b.md")); err == nil {
		t.Fatal("a removal on A did not reach B's Claude Code dir")
	}

}

// TestVanishedFolderIsNoDeletion: a repo folder that disappears (a reset, a clone without
// it) fills again from Claude Code's dir instead of emptying it.
func TestVanishedFolderIsNoDeletion(t *testing.T) {
	a := newMachine(t, "alpha", "git@github.com:acme/widget.git", "widget")
	testutil.WriteFile(t, a.memDir(t), "fact.md", fact)
	a.sync(t)
	if err := os.RemoveAll(filepath.Join(a.repo, "agents")); err != nil {
		t.Fatal(err)
	}
	a.sync(t)
	if _, err := os.Stat(filepath.Join(a.memDir(t), "fact.md")); err != nil {
		t.Fatalf("the memory went with the repo folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(a.repo, "agents", "claude-code", "github.com", "acme", "widget", "fact.md")); err != nil {
		t.Fatalf("the repo folder was not filled again: %v", err)
	}
}

// TestUnsyncedProjects: a checkout with neither origin nor commit, and a folder that is no
// checkout, are reported with a reason; a symlinked memory file is never read.
func TestUnsyncedProjects(t *testing.T) {
	root := t.TempDir()
	testutil.RunGit(t, root, "init", "-q", "empty")
	s := New(Options{ConfigDir: t.TempDir(), Home: t.TempDir(), Roots: []string{root}, Repo: t.TempDir(), StateDir: t.TempDir()})
	r, err := s.Sync()
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, p := range r.Unsynced {
		reasons[filepath.Base(p.Path)] = p.Reason
	}
	if !strings.Contains(reasons["empty"], "no origin") || !strings.Contains(reasons[filepath.Base(root)], "not a git checkout") || len(r.Synced) != 0 {
		t.Fatalf("unsynced: %+v synced: %+v", r.Unsynced, r.Synced)
	}

	a := newMachine(t, "alpha", "git@github.com:acme/widget.git", "widget")
	secret := filepath.Join(t.TempDir(), "id_rsa")
	testutil.WriteFile(t, filepath.Dir(secret), "id_rsa", "PRIVATE KEY\n")
	if err := os.MkdirAll(a.memDir(t), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(a.memDir(t), "key.md")); err != nil {
		t.Fatal(err)
	}
	a.sync(t)
	if _, err := os.Lstat(filepath.Join(a.repo, "agents", "claude-code", "github.com", "acme", "widget", "key.md")); err == nil {
		t.Fatal("a symlinked memory file was copied into the repo")
	}
}
