package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// A one-shot sync (a fresh Repo) fast-forwarding a git clone splices the changed paths
// into the clone's index, which its cache-tree extension shows is the old HEAD's, instead
// of walking the whole tree; an index whose cache-tree a `git add` invalidated gets the
// whole walk, and the staged file is gone (memd owns the index). On the old code every
// first checkout of a process walked the whole tree (verifiedBase stays 0).
func TestFirstCheckoutSplicesIntoGitsIndex(t *testing.T) {
	for _, staged := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "staged"}[staged], func(t *testing.T) {
			root := t.TempDir()
			bare := filepath.Join(root, "remote.git")
			seed := filepath.Join(root, "seed")
			mine := filepath.Join(root, "mine")
			testutil.RunGit(t, root, "init", "-q", "--bare", "-b", "main", bare)
			testutil.RunGit(t, root, "init", "-q", "-b", "main", seed)
			for _, p := range []string{"a/1.html", "a/2.html", "b/3.html", "c.html"} {
				write(t, seed, p, "seed "+p)
			}
			testutil.RunGit(t, seed, "add", "-A")
			testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
			testutil.RunGit(t, seed, "push", "-q", bare, "main")
			testutil.RunGit(t, root, "clone", "-q", bare, mine)
			write(t, seed, "a/2.html", "remote change")
			write(t, seed, "b/4.html", "remote new")
			testutil.RunGit(t, seed, "rm", "-q", "c.html")
			testutil.RunGit(t, seed, "add", "-A")
			testutil.RunGit(t, seed, "commit", "-q", "-m", "remote")
			testutil.RunGit(t, seed, "push", "-q", bare, "main")
			if staged {
				write(t, mine, "extra.html", "staged by a person")
				testutil.RunGit(t, mine, "add", "extra.html")
				if err := os.Remove(filepath.Join(mine, "extra.html")); err != nil {
					t.Fatal(err)
				}
			}

			r := openTest(t, mine, testOptions())
			res, err := r.Sync(context.Background(), RemoteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.FastForward {
				t.Fatalf("want a fast-forward, got %+v", res)
			}
			r.WaitIndexRefresh()
			want := int64(1)
			if staged {
				want = 0
			}
			if got := r.idx.verifiedBase.Load(); got != want {
				t.Fatalf("index files verified by cache-tree and spliced: %d, want %d", got, want)
			}
			// The index is HEAD's exactly, and clean.
			idx := testutil.RunGit(t, mine, "ls-files", "-s")
			var fromTree []string
			for _, l := range strings.Split(strings.TrimSpace(testutil.RunGit(t, mine, "ls-tree", "-r", "HEAD")), "\n") {
				meta, p, _ := strings.Cut(l, "\t")
				f := strings.Fields(meta)
				fromTree = append(fromTree, f[0]+" "+f[2]+" 0\t"+p)
			}
			if strings.TrimSpace(idx) != strings.Join(fromTree, "\n") {
				t.Fatalf("index is not HEAD's tree:\n%s\nwant\n%s", idx, strings.Join(fromTree, "\n"))
			}
			if out := testutil.RunGit(t, mine, "status", "--porcelain", "-uall"); out != "" {
				t.Fatalf("git status not clean:\n%s", out)
			}
		})
	}
}

func write(t *testing.T, dir, p, body string) {
	t.Helper()
	abs := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(abs, []byte(body+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
