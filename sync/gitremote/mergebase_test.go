package gitremote

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd/internal/testutil"
)

// randomHistory writes n commits (empty tree) whose parents and dates are drawn from rng:
// merges of recent commits (criss-cross ones included), dates that go backwards, equal
// dates, and a second root. It returns the hashes in creation order.
func randomHistory(t *testing.T, dir string, rng *rand.Rand, n int) []plumbing.Hash {
	t.Helper()
	gr, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := gr.Storer
	tree := &object.Tree{}
	to := s.NewEncodedObject()
	if err := tree.Encode(to); err != nil {
		t.Fatal(err)
	}
	th, err := s.SetEncodedObject(to)
	if err != nil {
		t.Fatal(err)
	}
	var hs []plumbing.Hash
	base := time.Unix(1_700_000_000, 0).UTC()
	for i := 0; i < n; i++ {
		var parents []plumbing.Hash
		if i > 0 && !(i == n/2 && rng.IntN(2) == 0) { // sometimes a second root halfway
			parents = append(parents, hs[max(0, i-1-rng.IntN(min(i, 8)))])
			if i > 2 && rng.IntN(4) == 0 {
				if p := hs[max(0, i-1-rng.IntN(min(i, 12)))]; p != parents[0] {
					parents = append(parents, p)
				}
			}
		}
		when := base.Add(time.Duration(i) * time.Minute)
		switch rng.IntN(10) {
		case 0:
			when = base.Add(time.Duration(rng.IntN(i+1)) * time.Minute) // skewed back
		case 1:
			when = base // the same second as many others
		}
		sig := object.Signature{Name: "t", Email: "t@t", When: when}
		c := &object.Commit{Author: sig, Committer: sig, Message: fmt.Sprintf("c%d\n", i), TreeHash: th, ParentHashes: parents}
		o := s.NewEncodedObject()
		if err := c.Encode(o); err != nil {
			t.Fatal(err)
		}
		h, err := s.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if err := s.SetReference(plumbing.NewHashReference("refs/heads/main", hs[n-1])); err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestDivergenceMatchesGit: the one walk's ahead/behind and merge bases are git's
// (`git rev-list --left-right --count`, `git merge-base --all`) on random histories with
// merges, criss-cross merges, skewed and equal dates and unrelated roots; the base a merge
// uses (the newest) is one of git's.
func TestDivergenceMatchesGit(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		dir := t.TempDir()
		testGit(t, dir, "init", "-q", "-b", "main")
		rng := rand.New(rand.NewPCG(seed, 13))
		hs := randomHistory(t, dir, rng, 60)
		gr, err := git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 12; k++ {
			l, rr := hs[len(hs)/3+rng.IntN(len(hs)*2/3)], hs[len(hs)/3+rng.IntN(len(hs)*2/3)]
			name := fmt.Sprintf("seed %d: %s...%s", seed, l.String()[:12], rr.String()[:12])
			want := strings.Fields(testutil.RunGit(t, dir, "rev-list", "--left-right", "--count", l.String()+"..."+rr.String()))
			a, b, bases, err := Divergence(gr.Storer, l, rr)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if fmt.Sprint(a) != want[0] || fmt.Sprint(b) != want[1] {
				t.Errorf("%s: ahead %d behind %d, git says %v", name, a, b, want)
			}
			if a == 0 || b == 0 {
				if len(bases) != 0 {
					t.Errorf("%s: one side contains the other, yet bases %v", name, bases)
				}
				continue
			}
			out, _ := testutil.Git{Env: testutil.IsolatedEnv(t.TempDir(), os.DevNull)}.Run(dir, nil,
				"merge-base", "--all", l.String(), rr.String()) // exit 1: unrelated
			wantBases := strings.Fields(out)
			var got []string
			for _, c := range bases {
				got = append(got, c.Hash.String())
			}
			slices.Sort(got)
			slices.Sort(wantBases)
			if !slices.Equal(got, wantBases) {
				t.Errorf("%s: bases %v, git says %v", name, got, wantBases)
			}
		}
	}
}

// testGit runs git in dir with no user or system config and fixed identities; it fails
// the test on error.
func testGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	g := testutil.Git{Env: append(testutil.IsolatedEnv(t.TempDir(), os.DevNull),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "LC_ALL=C")}
	out, err := g.Run(dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
