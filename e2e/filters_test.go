package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestFiltersUnderMemdRun: a repo set up by plain git with git-crypt, an eol rule and a
// required filter that fails, then `memd run`: the secret is committed encrypted (no
// object holds it), a CRLF memory is committed with LF, the file whose filter fails is
// held (reason filter, the driver named, one event, the gauge) and never committed, and git
// status is clean once it is gone.
func TestFiltersUnderMemdRun(t *testing.T) {
	if _, err := exec.LookPath("git-crypt"); err != nil {
		t.Skip("git-crypt not installed")
	}
	w := newWorld(t)
	w.write(".gitattributes", "secret/** filter=git-crypt diff=git-crypt\n*.txt text eol=lf\n*.sec filter=broken\n")
	w.sh("git-crypt init && git config filter.broken.clean 'echo no key >&2; exit 1' && git config filter.broken.required true && " +
		"git add .gitattributes && git -c user.name=t -c user.email=t@t commit -qm 'git-crypt'")
	d := w.start()
	const marker = "MARKER-e2e-91c4"
	w.write("secret/plan.md", "the plan: "+marker+"\n")
	w.write("notes/win.txt", "one\r\ntwo\r\n")
	w.write("keys.sec", "raw bytes\n")
	var doc heldDoc
	testutil.WaitFor(t, "the secret and the note committed, keys.sec held", commitTimeout, func() bool {
		_, okS := w.committed("secret/plan.md")
		_, okN := w.committed("notes/win.txt")
		out, _ := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", "json")
		doc = heldDoc{}
		_ = json.Unmarshal([]byte(out), &doc)
		return okS && okN && len(doc.Held) == 1
	}, d.Describe)
	if h := doc.Held[0]; h.Path != "keys.sec" || h.Reason != "filter" || h.Rule != "broken" {
		t.Errorf("held %+v, want keys.sec, reason filter, rule broken", h)
	}
	if got, _ := w.committed("notes/win.txt"); got != "one\ntwo\n" {
		t.Errorf("committed %q, git add stores LF", got)
	}
	if objs := w.git("cat-file", "--batch-all-objects", "--batch"); strings.Contains(objs, marker) {
		t.Error("an object holds the secret in plaintext")
	}
	if got := d.Metrics(`memd_held_files{reason="filter"}`)[`memd_held_files{reason="filter"}`]; got != 1 {
		t.Errorf(`memd_held_files{reason="filter"} = %v, want 1`, got)
	}
	w.neverCommitted("keys.sec")
	w.sh("rm keys.sec")
	w.checkClean(d)
	if got := w.read("secret/plan.md"); got != "the plan: "+marker+"\n" {
		t.Errorf("work tree %q", got)
	}
	if out, _ := w.memd("doctor", "--config", w.config); !strings.Contains(out, "git filters in use: git-crypt") || strings.Contains(out, "problem filters") {
		t.Errorf("memd doctor:\n%s", out)
	}
}
