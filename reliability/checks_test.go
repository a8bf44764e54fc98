package reliability

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The checkers must be able to fail: a history with a half-written version of a lock
// writer's file, a lost write and a conflict marker is caught by each of them.
func TestCheckersCatchProblems(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOpts{noInit: true})
	w.gitIn(w.home, "init", "-q", "-b", "main", w.repo)
	spec := writerSpec{Repo: w.repo, ID: 0, Mode: modeLock, Count: 2, Files: 1}
	a, b := spec.parts(0)
	commit := func(content string) {
		w.write(spec.rel(0), content)
		w.git("add", "-A")
		w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
	}
	commit(a) // the half state, committed
	commit(a + b)
	problems, versions := w.halfWritten([]writerSpec{spec})
	if versions != 2 || len(problems) != 1 || !strings.Contains(problems[0], "half-written") {
		t.Fatalf("halfWritten: %d versions, problems %q; want 2 versions and the half one", versions, problems)
	}

	// A final content that is not in HEAD, a deleted file still there, a conflict marker.
	w.write("areas/x.html", "<<<<<<< ours\nx\n>>>>>>> theirs\n")
	w.git("add", "-A")
	w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "marker")
	must(t, os.WriteFile(filepath.Join(w.repo, "areas", "y.html"), []byte("never committed\n"), 0o644))
	found, problems := w.verifyRepo(map[string]expectation{
		"areas/y.html":   {content: "never committed\n"},
		"areas/x.html":   {deleted: true},
		spec.rel(0):      {content: a + b},
		"areas/none.htm": {deleted: true},
	})
	if found != 2 || len(problems) != 3 {
		t.Fatalf("verifyRepo: found %d, problems %q; want 2 found and 3 problems (lost write, undeleted, marker)", found, problems)
	}
}
