package repofiles

import (
	"math/rand"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// TestQuickMatcherSameAsGoGit: the quick pre-tests only skip patterns, so the answer is
// always go-git's own matcher's answer.
func TestQuickMatcherSameAsGoGit(t *testing.T) {
	lines := []string{"*.log", "!keep.log", "build/", "cache", "mine-*", "*", "!*.html", "a*b",
		"/rooted", "docs/**/x-*.html", "*.swp", "4913", ".#*", "*~", "name ", "!build/", "x?", "[ab]c",
		"notes.html", "!notes.html/"}
	comps := []string{"a", "b", "build", "cache", "keep.log", "x.log", "mine-1", "ab", "axb", "docs",
		"x-1.html", "notes.html", "rooted", ".#n", "n~", "4913", "xy", "ac", "bc", "name"}
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 300; round++ {
		var es []entry
		var ps []gitignore.Pattern
		for i := rng.Intn(6) + 1; i > 0; i-- {
			line := lines[rng.Intn(len(lines))]
			var domain []string
			if rng.Intn(3) == 0 {
				domain = []string{comps[rng.Intn(len(comps))]}
			}
			es = append(es, newEntry(line, domain))
			ps = append(ps, gitignore.ParsePattern(line, domain))
		}
		ours, theirs := matcher(es), gitignore.NewMatcher(ps)
		for j := 0; j < 50; j++ {
			path := make([]string, rng.Intn(4)+1)
			for k := range path {
				path[k] = comps[rng.Intn(len(comps))]
			}
			isDir := rng.Intn(2) == 0
			if a, b := ours.Match(path, isDir), theirs.Match(path, isDir); a != b {
				t.Fatalf("path %q dir=%v: quick matcher %v, go-git %v", strings.Join(path, "/"), isDir, a, b)
			}
		}
	}
}
