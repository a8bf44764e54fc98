package gitrepo

import (
	"slices"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
)

// Plain git beside memd (docs/ARCHITECTURE.md §11 "Other writers"): git's ignore rules, gitlinks. Each
// case is a bare remote and two clones; B plays the other machine (or the user's git).

// useRepoRules gives r the repo's own ignore rules as they are on disk now, as the agent
// does when a .gitignore changes.
func useRepoRules(t *testing.T, r *Repo) {
	t.Helper()
	ig, err := repofiles.New(r.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.SetIgnore(ig.Ignored)
}

// pushIgnoreFromB makes B push a .gitignore that ignores every memory and the ledger, and
// A fetch it: a broad rule another machine delivered.
func pushIgnoreFromB(t *testing.T, w *syncWorld) {
	t.Helper()
	testutil.WriteFile(t, w.bDir, ".gitignore", "*.html\n*.jsonl\n")
	testutil.RunGit(t, w.bDir, "add", ".gitignore")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "ignore")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, w.a)
	w.a.WaitIndexRefresh()
	useRepoRules(t, w.a)
}

func TestIgnoreRulesNeverApplyToTrackedPaths(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "base\n", "memory.jsonl": "{\"id\":\"1\"}\n", "old/x.html": "x\n"})
	pushIgnoreFromB(t, w)
	testutil.WriteFile(t, w.aDir, "notes/a.html", "edited under *.html\n")
	testutil.WriteFile(t, w.aDir, "memory.jsonl", "{\"id\":\"1\"}\n{\"id\":\"2\"}\n")
	testutil.WriteFile(t, w.aDir, "notes/new.html", "untracked and ignored\n")
	removeFile(t, w.aDir, "old/x.html")
	dirty, err := w.a.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"memory.jsonl", "notes/a.html", "old/x.html"}; !slices.Equal(dirty, want) {
		t.Fatalf("reconcile %q, want %q (tracked paths whatever .gitignore says)", dirty, want)
	}
	res := mustCommit(t, w.a, "notes", "memory.jsonl", "old")
	if res.Modified != 2 || res.Deleted != 1 || res.Added != 0 {
		t.Fatalf("commit %+v: want the two tracked edits and the deletion, not the ignored new file", res)
	}
	tree := lsTree(t, w.aDir)
	if _, ok := tree["notes/new.html"]; ok {
		t.Fatal("an untracked ignored file was committed")
	}
	if got := testutil.RunGit(t, w.aDir, "show", "HEAD:memory.jsonl"); !strings.Contains(got, `"2"`) {
		t.Fatalf("ledger line not committed: %q", got)
	}
	// The whole tree staged at once ("" = root) follows the same rule.
	testutil.WriteFile(t, w.aDir, "notes/a.html", "again\n")
	if res := mustCommit(t, w.a, "."); res.Modified != 1 || res.Added != 0 {
		t.Fatalf("root commit %+v", res)
	}
}

func TestFetchNeverOverwritesEditedIgnoredTrackedFile(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "base\n", "memory.jsonl": "{\"id\":\"1\",\"text\":\"a\"}\n"})
	pushIgnoreFromB(t, w)
	testutil.RunGit(t, w.bDir, "pull", "-q", "origin", "main")
	// A edits both, uncommitted; B changes both and pushes.
	testutil.WriteFile(t, w.aDir, "notes/a.html", "edit on A\n")
	testutil.WriteFile(t, w.aDir, "memory.jsonl", "{\"id\":\"1\",\"text\":\"a\"}\n{\"id\":\"A\",\"text\":\"from A\"}\n")
	testutil.WriteFile(t, w.bDir, "notes/a.html", "edit on B\n")
	testutil.WriteFile(t, w.bDir, "memory.jsonl", "{\"id\":\"1\",\"text\":\"a\"}\n{\"id\":\"B\",\"text\":\"from B\"}\n")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-am", "B edits")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, w.a)
	all := readWork(t, w.aDir, "notes/a.html")
	for _, c := range conflictCopies(t, w.aDir) {
		all += readWork(t, w.aDir, c)
	}
	if !strings.Contains(all, "edit on A") || !strings.Contains(all, "edit on B") {
		t.Fatalf("an edit was lost: the path and its copies hold %q", all)
	}
	led := readWork(t, w.aDir, "memory.jsonl")
	if !strings.Contains(led, "from A") || !strings.Contains(led, "from B") {
		t.Fatalf("ledger lost a line: %q", led)
	}
	if got := testutil.RunGit(t, w.bare, "show", "main:memory.jsonl"); !strings.Contains(got, "from A") {
		t.Fatalf("A's ledger line not pushed: %q", got)
	}
	fsck(t, w.aDir)
}

func TestGitlinkOverEditedFileKeepsEdit(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "base\n", "notes/b.html": "b\n"})
	// B (plain git) turns notes/a.html into a submodule's gitlink.
	sub := strings.Repeat("ab", 20)
	testutil.RunGit(t, w.bDir, "rm", "-q", "notes/a.html")
	testutil.RunGit(t, w.bDir, "update-index", "--add", "--cacheinfo", "160000,"+sub+",notes/a.html")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "submodule over a")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	// A edited the file meanwhile and has a commit of its own to push.
	testutil.WriteFile(t, w.aDir, "notes/a.html", "edit on A\n")
	mustCommit(t, w.a, "notes/a.html")
	testutil.WriteFile(t, w.aDir, "notes/b.html", "b on A\n")
	mustCommit(t, w.a, "notes/b.html")
	res, err := w.a.Sync(t.Context(), pushOpts())
	if err != nil {
		t.Fatalf("sync stopped on a gitlink: %v", err)
	}
	if !res.Pushed {
		t.Fatalf("A's commits not pushed: %+v", res)
	}
	var kept bool
	for _, c := range conflictCopies(t, w.aDir) {
		kept = kept || readWork(t, w.aDir, c) == "edit on A\n"
	}
	if !kept && readWork(t, w.aDir, "notes/a.html") != "edit on A\n" {
		t.Fatalf("A's edit lost (copies %v)", conflictCopies(t, w.aDir))
	}
	if got := lsTree(t, w.aDir)["notes/a.html"]; got != "160000 "+sub {
		t.Fatalf("gitlink not carried as is: %q", got)
	}
	if got := testutil.RunGit(t, w.bare, "show", "main:notes/b.html"); got != "b on A\n" {
		t.Fatalf("b.html %q", got)
	}
	fsck(t, w.aDir)
	// Later commits leave the gitlink alone.
	testutil.WriteFile(t, w.aDir, "notes/c.html", "c\n")
	mustCommit(t, w.a, ".")
	if got := lsTree(t, w.aDir)["notes/a.html"]; got != "160000 "+sub {
		t.Fatalf("gitlink dropped by a later commit: %q", got)
	}
	statusClean(t, w.a)
}

func TestConfiguredLockFileNeverCommitted(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "base\n"})
	cfg := memd.DefaultConfig()
	cfg.Lock.File = "writer.lock"
	opts := OptionsFromConfig(cfg)
	opts.Author, opts.Now, opts.Hostname = testOptions().Author, testOptions().Now, "hosta"
	r := openTest(t, w.bDir, opts)
	ig, err := repofiles.New(w.bDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.SetIgnore(ig.WithLockFile(cfg.Lock.File).Ignored)
	testutil.WriteFile(t, w.bDir, "writer.lock", "pid 1\n")
	testutil.WriteFile(t, w.bDir, "WRITER.LOCK", "pid 1\n") // the same file on a case-insensitive file system
	testutil.WriteFile(t, w.bDir, "notes/a.html", "edit\n")
	for _, paths := range [][]string{{"writer.lock", "WRITER.LOCK", "notes/a.html"}, {"."}} {
		mustCommit(t, r, paths...)
		for p := range lsTree(t, w.bDir) {
			if strings.EqualFold(p, "writer.lock") {
				t.Fatalf("commit of %q committed the lock file %s", paths, p)
			}
		}
	}
	r.WaitIndexRefresh()
	dirty, err := r.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range dirty {
		if strings.EqualFold(p, "writer.lock") {
			t.Fatalf("reconcile %q: the lock file is not a change", dirty)
		}
	}
}

func TestGitlinkReplacedByFileAgain(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "base\n"})
	sub := strings.Repeat("cd", 20)
	testutil.RunGit(t, w.bDir, "rm", "-q", "notes/a.html")
	testutil.RunGit(t, w.bDir, "update-index", "--add", "--cacheinfo", "160000,"+sub+",notes/a.html")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "submodule over a")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, w.a)
	statusClean(t, w.a)
	// The submodule goes again, a file takes its place.
	testutil.RunGit(t, w.bDir, "rm", "-q", "--cached", "notes/a.html")
	testutil.WriteFile(t, w.bDir, "notes/a.html", "a file again\n")
	testutil.RunGit(t, w.bDir, "add", "notes/a.html")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "file again")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, w.a)
	if got := readWork(t, w.aDir, "notes/a.html"); got != "a file again\n" {
		t.Fatalf("notes/a.html holds %q", got)
	}
	statusClean(t, w.a)
}
