package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// reconcileBoth runs both reconcile implementations and requires them to
// agree.
func reconcileBoth(t *testing.T, r *Repo) []string {
	t.Helper()
	viaGit, err := r.reconcileGit("git")
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	viaWalk, err := r.reconcileWalkLocked()
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(viaGit, viaWalk) {
		t.Fatalf("git status says %q, walk says %q", viaGit, viaWalk)
	}
	pub, err := r.Reconcile()
	if err != nil || !reflect.DeepEqual(pub, viaGit) {
		t.Fatalf("Reconcile %q %v", pub, err)
	}
	return viaGit
}

func TestReconcileFindsWhatTheWatcherMissed(t *testing.T) {
	dir := newGitDir(t)
	opts := testOptions()
	opts.Ignore = func(rel string, isDir bool) bool { return strings.HasSuffix(rel, "~") }
	r := openTest(t, dir, opts)
	testutil.WriteFile(t, dir, "areas/a.html", "a")
	testutil.WriteFile(t, dir, "areas/b.html", "b")
	testutil.WriteFile(t, dir, "projects/p/c.html", "c")
	if err := os.Symlink("a.html", filepath.Join(dir, "areas/l")); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, r, ".")
	statusClean(t, r)
	if got := reconcileBoth(t, r); len(got) != 0 {
		t.Fatalf("clean repo reconciles to %q", got)
	}
	// While "not watching": an edit, a new file in a new dir, a deletion,
	// a mode change, a retargeted link, an ignored backup.
	testutil.WriteFile(t, dir, "areas/a.html", "edited")
	testutil.WriteFile(t, dir, "resources/new dir/ü.html", "new")
	os.Remove(filepath.Join(dir, "projects/p/c.html"))
	os.Chmod(filepath.Join(dir, "areas/b.html"), 0o755)
	os.Remove(filepath.Join(dir, "areas/l"))
	os.Symlink("b.html", filepath.Join(dir, "areas/l"))
	testutil.WriteFile(t, dir, "areas/a.html~", "backup")
	testutil.WriteFile(t, dir, "vendor/nested/x.md", "not ours")
	testutil.RunGit(t, filepath.Join(dir, "vendor/nested"), "init", "-q") // a nested repo
	want := []string{"areas/a.html", "areas/b.html", "areas/l", "projects/p/c.html", "resources/new dir/ü.html"}
	got := reconcileBoth(t, r)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("reconcile %q want %q", got, want)
	}
	// Committing exactly those paths leaves nothing to reconcile.
	res := mustCommit(t, r, got...)
	if res.Added != 1 || res.Modified != 3 || res.Deleted != 1 {
		t.Fatalf("commit of reconciled paths %+v", res)
	}
	os.Remove(filepath.Join(dir, "areas/a.html~")) // untracked for git
	os.RemoveAll(filepath.Join(dir, "vendor"))
	statusClean(t, r)
	if got := reconcileBoth(t, r); len(got) != 0 {
		t.Fatalf("after commit: %q", got)
	}
}

func TestReconcileUnbornAndStaleIndex(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "x.html", "x")
	if got := reconcileBoth(t, r); !reflect.DeepEqual(got, []string{"x.html"}) {
		t.Fatalf("unborn: %q", got)
	}
	mustCommit(t, r, "x.html")
	r.WaitIndexRefresh()
	// An index that lags HEAD (removed) still gives the right answer.
	os.Remove(filepath.Join(dir, ".git/index"))
	testutil.WriteFile(t, dir, "x.html", "y")
	r.mu.Lock()
	got, err := r.reconcileWalkLocked()
	r.mu.Unlock()
	if err != nil || !reflect.DeepEqual(got, []string{"x.html"}) {
		t.Fatalf("walk with no index: %q %v", got, err)
	}
}

// BenchmarkReconcile compares the two reconcile ways on a clean n-file repo
// with 5 edited files (the decision in reconcile.go rests on this).
func BenchmarkReconcile(b *testing.B) {
	for _, n := range benchSizes() {
		dir, files := benchRepo(b, n)
		r, err := Open(dir, testOptions())
		if err != nil {
			b.Fatal(err)
		}
		if err := r.RefreshIndex(); err != nil {
			b.Fatal(err)
		}
		appendTo(b, dir, files[:5], 0)
		b.Run(fmt.Sprintf("files=%d/git-status", n), func(b *testing.B) {
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				got, err := r.reconcileGit("git")
				if err != nil || len(got) != 5 {
					b.Fatalf("%v %d", err, len(got))
				}
			}
		})
		b.Run(fmt.Sprintf("files=%d/walk", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r.mu.Lock()
				got, err := r.reconcileWalkLocked()
				r.mu.Unlock()
				if err != nil || len(got) != 5 {
					b.Fatalf("%v %d", err, len(got))
				}
			}
		})
		r.Close()
	}
}
