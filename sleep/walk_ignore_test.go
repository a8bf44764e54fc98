package sleep

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
)

// The walk honours the committer's ignore rules (issue 12 item 7): an ignored folder is not
// entered and an ignored file is not listed, so no phase can plan (and commit) it.
func TestWalkHonoursIgnore(t *testing.T) {
	dir := t.TempDir()
	for rel, c := range map[string]string{
		".gitignore":                          "areas/private/\n*.secret.html\n",
		"areas/private/20230101-diary.html":   "x",
		"areas/oncall/20230102-kept.html":     "x",
		"areas/oncall/20230103-a.secret.html": "x",
		"areas/oncall/notes.html.swp":         "x",
	} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ign, err := repofiles.New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := walkTree(dir, ign.Ignored)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, f := range tr.files {
		got[f.rel] = true
	}
	if !got["areas/oncall/20230102-kept.html"] || !got[".gitignore"] {
		t.Errorf("walk lost a tracked file: %v", got)
	}
	for _, rel := range []string{"areas/private/20230101-diary.html", "areas/oncall/20230103-a.secret.html", "areas/oncall/notes.html.swp"} {
		if got[rel] {
			t.Errorf("walk lists ignored %s", rel)
		}
	}
	all, _ := walkTree(dir, nil)
	if len(all.files) != 5 {
		t.Errorf("without rules the walk lists %d files, want 5", len(all.files))
	}
}

// TestWalkSeesTheRepoFiles: sleep's parallel walk lists the regular files among the repo's
// files (repofiles.Walk's set; the other consumers are checked on the same fixture in
// agent.TestEveryConsumerSeesTheSameFiles): nothing ignored, nothing in a nested
// repository, no FIFO; symlinks are committed as links but sleep never reads or rewrites
// one, so it does not list them.
func TestWalkSeesTheRepoFiles(t *testing.T) {
	m := testutil.NewMixedRepo(t)
	ign, err := repofiles.New(m.Root, testutil.MixedRepoIgnore)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := walkTree(m.Root, ign.Ignored)
	if err != nil {
		t.Fatal(err)
	}
	var got, mems []string
	for _, f := range tr.files {
		got = append(got, f.rel)
		if f.mem {
			mems = append(mems, f.rel)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, m.Regular) {
		t.Errorf("sleep's walk:\n got %q\nwant %q", got, m.Regular)
	}
	if !slices.Equal(mems, m.Memories) {
		t.Errorf("sleep's memories: got %q, want %q", mems, m.Memories)
	}
}
