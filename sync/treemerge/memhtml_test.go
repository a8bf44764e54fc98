package treemerge

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
)

const stampedDoc = "<!doctype html>\n<html>\n<head>\n<title>T</title>\n<meta name=\"memhtml-type\" content=\"episodic\">\n" +
	"<meta name=\"memhtml-status\" content=\"active\">\n<meta name=\"memhtml-created\" content=\"2023-01-01\">\n" +
	"<meta name=\"memhtml-updated\" content=\"2023-01-01\">\n</head>\n<body>\n<article>\n<p><mark>Claim.</mark></p>\n</article>\n</body>\n</html>\n"

// Two machines on memhtml's files: one archives a memory the way memhtml does (a move with
// stamps, not a pure rename) while the other edits it, and both bump the access sidecar. The
// edit lands at the archive path still stamped archived, nothing is left at the old path, the
// sidecar holds each row's maximum, and no conflict copy is made.
func TestMergeMemhtmlArchiveAndAccess(t *testing.T) {
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	const p = "areas/x/ep.html"
	row := func(n int) string {
		return `{"path":"areas/y.html","accessCount":` + string(rune('0'+n)) + `,"reinforcementCount":0,"outcomeScore":0,"lastAccessedAt":null,"lastReinforcedAt":null,"updatedAt":"2026-11-0` + string(rune('0'+n)) + `T00:00:00Z"}` + "\n"
	}
	testutil.WriteFile(t, dir, p, stampedDoc)
	testutil.WriteFile(t, dir, AccessStatePath, row(1))
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "base")
	testutil.RunGit(t, dir, "checkout", "-q", "-b", "theirs")
	testutil.WriteFile(t, dir, p, strings.Replace(stampedDoc, "Claim.", "Claim, edited.", 1))
	testutil.WriteFile(t, dir, AccessStatePath, row(5))
	testutil.RunGit(t, dir, "commit", "-qam", "edit")
	testutil.RunGit(t, dir, "checkout", "-q", "main")
	to := memd.ArchivePath(p, 2026)
	testutil.RunGit(t, dir, "rm", "-q", p)
	testutil.WriteFile(t, dir, to, string(memfile.ArchiveStamps([]byte(stampedDoc), time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))))
	testutil.WriteFile(t, dir, AccessStatePath, row(3))
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "archive")

	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree := func(rev string) plumbing.Hash {
		return plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", rev+"^{tree}")))
	}
	st := NewStore(repo.Storer, storeWriter(repo.Storer))
	res, err := Merge(st, tree("main~1"), tree("main"), tree("theirs"), Policy{Host: "a", Now: time.Unix(0, 0)}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Conflicts) > 0 {
		t.Errorf("conflict copies: %v", res.Conflicts)
	}
	read := func(path string) string {
		e, err := TreeFile(repo.Storer, res.Tree, path)
		if err != nil || e == nil {
			return ""
		}
		b, err := readBlob(repo.Storer, e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if read(p) != "" {
		t.Errorf("%s left at the old path", p)
	}
	got := read(to)
	for _, want := range []string{"Claim, edited.", `<meta name="memhtml-status" content="archived">`, `<meta name="memhtml-archived" content="2026-12-02T03:00:00Z">`} {
		if !strings.Contains(got, want) {
			t.Errorf("archived file lacks %s:\n%s", want, got)
		}
	}
	if got := read(AccessStatePath); got != row(5) {
		t.Errorf("access sidecar %q, want the maximum %q", got, row(5))
	}
}
