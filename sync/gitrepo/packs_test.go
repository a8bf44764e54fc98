package gitrepo

import (
	"fmt"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestFetchMergesPiledUpPacks: every fetch writes a pack; past maxPacks the small ones are
// merged, and the clone keeps reading, committing and syncing with every object intact.
func TestFetchMergesPiledUpPacks(t *testing.T) {
	old := maxPacks
	maxPacks = 4
	defer func() { maxPacks = old }()
	copyFileFetches = false // each fetch a pack (index-pack), not copied objects (filefetch.go)
	defer func() { copyFileFetches = true }()
	w := newSyncWorld(t, map[string]string{"areas/base.html": "base\n"})
	most := 0
	for i := 0; i < 12; i++ {
		testutil.WriteFile(t, w.bDir, fmt.Sprintf("areas/b%02d.html", i), fmt.Sprintf("b %d\n", i))
		mustCommit(t, w.b, fmt.Sprintf("areas/b%02d.html", i))
		mustSync(t, w.b)
		mustSync(t, w.a)
		if n := w.a.packCount(); n > most {
			most = n
		}
	}
	if most < 2 {
		t.Fatalf("at most %d packs on A: fetches write no packs here, the test cannot see them merged", most)
	}
	if most > maxPacks+1 {
		t.Errorf("packs piled up to %d (limit %d): fetched packs were not merged", most, maxPacks)
	}
	// A still reads what it fetched: it commits on top and both sides agree.
	testutil.WriteFile(t, w.aDir, "areas/a.html", "a\n")
	mustCommit(t, w.a, "areas/a.html")
	w.syncAll(t)
	w.check(t)
	fsck(t, w.aDir) // the merged packs are whole to git
	for i := 0; i < 12; i++ {
		if got := readWork(t, w.aDir, fmt.Sprintf("areas/b%02d.html", i)); got != fmt.Sprintf("b %d\n", i) {
			t.Errorf("b%02d on A: %q", i, got)
		}
	}
}
