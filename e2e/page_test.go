package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestPageShowsChangeAndConflict: a real `memd run` with a bare remote, its page open in
// headless Chromium. A change shows in the line, the counts and the commits chart; a file
// changed on both sides shows as an event naming both files and as a conflict copy waiting,
// all redrawn over the event stream without a reload.
func TestPageShowsChangeAndConflict(t *testing.T) {
	t.Parallel()
	chrome := testutil.Chrome(t)
	w := newWorld(t)
	bare := filepath.Join(w.home, "remote.git")
	w.sh("git init -q --bare -b main " + bare + " && git remote add origin " + bare)
	w.write("areas/shared.html", "<p>base</p>\n")
	d := w.start()
	pushed := func() {
		t.Helper()
		w.waitCommitted(d)
		testutil.WaitFor(t, "the remote to hold HEAD", commitTimeout, func() bool {
			return testutil.Git{Env: w.env}.Rev(bare, "refs/heads/main") == w.head()
		}, d.Describe)
	}
	pushed()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	page := testutil.StartCDP(t, ctx, chrome, "http://"+d.Addr()+"/")
	text := func(sel string) string {
		return `(document.querySelector(` + strconv.Quote(sel) + `) || {}).textContent || ""`
	}
	page.WaitEval(t, text("#conn"), "live", 30*time.Second)
	before := page.Eval(t, text(`#counts [data-count="areas"] dd`))

	// A change: committed, and the page says so.
	from := w.head()
	w.write("areas/page-change.html", "<p>new</p>\n")
	w.waitHeadMoves(d, from)
	page.WaitEvalContains(t, text("#summary"), "memd: +1", commitTimeout)
	n, _ := strconv.Atoi(before)
	page.WaitEval(t, text(`#counts [data-count="areas"] dd`), strconv.Itoa(n+1), commitTimeout)
	page.WaitEvalContains(t, text("#total"), "commit", commitTimeout)
	if got := page.Eval(t, text("#total")); got == "0 commits" {
		t.Fatalf("commits chart total = %q after a commit", got)
	}

	// A conflict: another clone changes the same file and pushes first; then ours changes it.
	pushed()
	other := filepath.Join(w.home, "other")
	g := testutil.Git{Env: w.env}
	for _, args := range [][]string{
		{"clone", "-q", bare, other},
	} {
		if out, err := g.Run(w.home, nil, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(other, "areas", "shared.html"), []byte("<p>theirs</p>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"-c", "user.name=other", "-c", "user.email=other@example.invalid", "commit", "-qam", "theirs"},
		{"push", "-q", "origin", "main"},
	} {
		if out, err := g.Run(other, nil, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	w.write("areas/shared.html", "<p>ours</p>\n")
	ev := page.WaitEvalContains(t, text("#events li span"), "conflict areas/shared.html changed on both sides; ours kept as areas/shared.conflict-", commitTimeout)
	cp := page.WaitEvalContains(t, text("#copies .copy"), "areas/shared.conflict-", commitTimeout)
	if !strings.HasSuffix(ev, cp) || !strings.HasSuffix(cp, ".html") {
		t.Fatalf("event %q does not name the copy %q", ev, cp)
	}
	if _, err := os.Stat(w.path(cp)); err != nil {
		t.Fatalf("the page names %s, which is not on disk: %v", cp, err)
	}
	page.WaitEvalContains(t, text("#summary"), "1 conflict", commitTimeout)
	if f := os.Getenv("MEMD_PAGE_SCREENSHOT"); f != "" { // PNGs for a person to look at: f-400.png, f-1000.png
		page.Screenshot(t, 400, f+"-400.png")
		page.Screenshot(t, 1000, f+"-1000.png")
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}
