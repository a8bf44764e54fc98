package gitrepo

import (
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// memhtml's generated listings (index.html, sitemap.xml) changed on both sides merge like
// derived files: theirs stays, no conflict copy (memhtml regenerates them).
func TestSyncGeneratedListingsTakeTheirs(t *testing.T) {
	w := newSyncWorld(t, map[string]string{
		"areas/inbox/index.html": "<ul><li>v1</li></ul>\n",
		"sitemap.xml":            "<urlset>v1</urlset>\n",
	})
	testutil.WriteFile(t, w.aDir, "areas/inbox/index.html", "<ul><li>from A</li></ul>\n")
	testutil.WriteFile(t, w.aDir, "sitemap.xml", "<urlset>A</urlset>\n")
	mustCommit(t, w.a, "areas", "sitemap.xml")
	testutil.WriteFile(t, w.bDir, "areas/inbox/index.html", "<ul><li>from B</li></ul>\n")
	testutil.WriteFile(t, w.bDir, "sitemap.xml", "<urlset>B</urlset>\n")
	mustCommit(t, w.b, "areas", "sitemap.xml")
	_, rb := w.syncAll(t)
	w.check(t)
	if len(rb.Conflicts) != 0 {
		t.Fatalf("conflict copies of generated listings: %v", rb.Conflicts)
	}
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "areas/inbox/index.html"); got != "<ul><li>from A</li></ul>\n" {
			t.Errorf("%s: listing = %q, want theirs (A)", d, got)
		}
		if got := readWork(t, d, "sitemap.xml"); got != "<urlset>A</urlset>\n" {
			t.Errorf("%s: sitemap = %q, want theirs (A)", d, got)
		}
	}
}
