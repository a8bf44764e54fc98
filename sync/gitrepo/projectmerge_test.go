package gitrepo

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/testutil"
)

// A project memory in the tree merge, end to end (the rules: sync/treemerge's mergelayout.go).

const layoutMD = "# proj\n\n## CRITICAL RULES\n\n- rule one\n\n## Architecture & Config Facts\n\n- fact a\n\n" +
	"## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- `history.md`.\n"

// Two machines edit one project memory and its history.md: the sync merges both files by
// structure, no conflict copy, every addition once on both clones and the remote.
func TestSyncProjectMemoryMerges(t *testing.T) {
	hist := "# proj: history\n\n- day one\n"
	w := newSyncWorld(t, map[string]string{"proj/MEMORY.md": layoutMD, "proj/history.md": hist,
		"proj/" + memorymd.FailedReplyName: "reply 0\n"})
	testutil.WriteFile(t, w.aDir, "proj/MEMORY.md", strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from A\n", 1))
	testutil.WriteFile(t, w.aDir, "proj/history.md", hist+"\n- A appended\n")
	testutil.WriteFile(t, w.aDir, "proj/"+memorymd.FailedReplyName, "reply A\n")
	mustCommit(t, w.a, "proj")
	testutil.WriteFile(t, w.bDir, "proj/MEMORY.md", strings.Replace(strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from B\n", 1),
		"- rule one\n", "- rule one\n- rule from B\n", 1))
	testutil.WriteFile(t, w.bDir, "proj/history.md", hist+"\n- B appended\n")
	testutil.WriteFile(t, w.bDir, "proj/"+memorymd.FailedReplyName, "reply B\n")
	mustCommit(t, w.b, "proj")
	_, rb := w.syncAll(t)
	if !rb.Merged || len(rb.Conflicts) != 0 {
		t.Fatalf("merged %v, conflicts %v", rb.Merged, rb.Conflicts)
	}
	w.check(t)
	wantMD := strings.Replace(strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from B\n- fact from A\n", 1),
		"- rule one\n", "- rule one\n- rule from B\n", 1)
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "proj/MEMORY.md"); got != wantMD {
			t.Errorf("%s: MEMORY.md\n%s\nwant\n%s", d, got, wantMD)
		}
		if got, want := readWork(t, d, "proj/history.md"), hist+"\n- B appended\n\n- A appended\n"; got != want {
			t.Errorf("%s: history.md %q, want %q", d, got, want)
		}
		// Same commit time on both sides (one test clock): theirs, A's pushed reply, stays.
		if got := readWork(t, d, "proj/"+memorymd.FailedReplyName); got != "reply A\n" {
			t.Errorf("%s: failed reply %q", d, got)
		}
		if cc := conflictCopies(t, d); len(cc) != 0 {
			t.Errorf("%s: conflict copies %v", d, cc)
		}
	}
}

// A version the structured merge cannot read (not UTF-8, a topic file over the size
// limit) falls back to a conflict copy: both versions are kept, the log names the file.
func TestSyncProjectMemoryBadInputConflictCopy(t *testing.T) {
	hist := "# proj: history\n\n- day one\n"
	w := newSyncWorld(t, map[string]string{"proj/MEMORY.md": layoutMD, "proj/history.md": hist})
	var logs bytes.Buffer
	bOpts := hostOptions("hostb")
	bOpts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	w.b.Close()
	w.b = openTest(t, w.bDir, bOpts)
	latin1 := strings.Replace(layoutMD, "- fact a\n", "- caf\xe9 from A\n", 1)
	big := hist + strings.Repeat("- a long history line, written many times over\n", 5<<20/48)
	testutil.WriteFile(t, w.aDir, "proj/MEMORY.md", latin1)
	testutil.WriteFile(t, w.aDir, "proj/history.md", big)
	mustCommit(t, w.a, "proj")
	testutil.WriteFile(t, w.bDir, "proj/MEMORY.md", strings.Replace(layoutMD, "- fact a\n", "- fact a\n- from B\n", 1))
	testutil.WriteFile(t, w.bDir, "proj/history.md", hist+"- B\n")
	mustCommit(t, w.b, "proj")
	_, rb := w.syncAll(t)
	want := []string{"proj/MEMORY.conflict-hostb-20261130T143205Z.md", "proj/history.conflict-hostb-20261130T143205Z.md"}
	if strings.Join(rb.Conflicts, ",") != strings.Join(want, ",") {
		t.Fatalf("conflicts %v, want %v", rb.Conflicts, want)
	}
	w.check(t)
	for _, name := range []string{"merge proj/MEMORY.md: cannot merge by structure: theirs version is not valid UTF-8",
		"merge proj/history.md: cannot merge by structure: theirs version is 5"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("log does not say %q:\n%s", name, logs.String())
		}
	}
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "proj/MEMORY.md") != latin1 || readWork(t, d, "proj/history.md") != big {
			t.Errorf("%s: theirs (A's) versions not at the paths", d)
		}
		if !strings.Contains(readWork(t, d, want[0]), "- from B\n") || readWork(t, d, want[1]) != hist+"- B\n" {
			t.Errorf("%s: ours (B's) versions not in the conflict copies", d)
		}
	}
}

// A merged MEMORY.md over the hard cap is written whole and reported (the note the tree
// merge logs), never cut.
