package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/sync/gitrepo"
)

// memd log --json streams the array json.Encoder printed for the whole log (the same bytes),
// and --limit N prints the newest N.
func TestLogJSONShapeAndLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory")
	if err := os.MkdirAll(filepath.Join(dir, "areas"), 0o755); err != nil {
		t.Fatal(err)
	}
	sleepGit(t, dir, "init", "-q", "-b", "main")
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(filepath.Join(dir, "areas/a.html"), []byte(fmt.Sprintf("<p>v%d & more</p>\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
		sleepGit(t, dir, "add", "-A")
		sleepGit(t, dir, "commit", "-qm", fmt.Sprintf("edit <%d>\n\nMemd-Host: desk", i))
	}
	r, err := gitrepo.Open(dir, gitrepo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := r.History().Log("areas/a.html")
	r.Close()
	if err != nil || len(all) != 3 {
		t.Fatalf("Log = %v, %v", all, err)
	}
	var want strings.Builder
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(all); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runMemd(t, "log", "--repo", dir, "--json", "areas/a.html")
	if code != 0 || out != want.String() {
		t.Fatalf("memd log --json: exit %d %s\n%s\nwant\n%s", code, errOut, out, want.String())
	}
	code, out, _ = runMemd(t, "log", "--repo", dir, "--limit", "1", "areas/a.html")
	if code != 0 || strings.Count(out, "modified") != 1 || !strings.Contains(out, all[0].Commit[:12]) {
		t.Fatalf("memd log --limit 1: exit %d\n%s", code, out)
	}
	code, out, _ = runMemd(t, "log", "--repo", dir, "--limit", "2", "--json", "areas/a.html")
	var two []gitrepo.LogEntry
	if code != 0 || json.Unmarshal([]byte(out), &two) != nil || len(two) != 2 || two[1].Commit != all[1].Commit {
		t.Fatalf("memd log --limit 2 --json: exit %d\n%s", code, out)
	}
	if code, _, _ := runMemd(t, "log", "--repo", dir, "--limit", "-1", "areas/a.html"); code != exitUsage {
		t.Errorf("--limit -1: exit %d, want %d", code, exitUsage)
	}
}
