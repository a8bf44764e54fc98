package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/secrets/secretstest"
	"github.com/memd-dev/memd/internal/testutil"
)

// secretLinesOf are the lines of the corpus' secrets that must appear nowhere (a private
// key block's armour lines are not secret, its body is).
func secretLinesOf(c *secretstest.Corpus) []string {
	var out []string
	for _, s := range c.Secrets {
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, "-----") {
				out = append(out, l)
			}
		}
	}
	return out
}

// heldDoc is the status document's held list.
type heldDoc struct {
	Held []struct {
		Path, Reason, Rule string
		Line               int
	} `json:"held"`
	Summary struct{ Text string } `json:"summary"`
}

// TestDaemonHoldsSecrets: memd run on a repo whose remote refuses (pre-receive, as push
// protection does) any push carrying the corpus' secrets. An agent writes the corpus: no
// push is refused, the clean memories and records arrive, the memories and records with a
// secret are held (the status line says so, the document and the sidebar list them, one
// event each, the metrics count them), and no secret is in any output: log, status
// document, page, /metrics, the remote's objects.
func TestDaemonHoldsSecrets(t *testing.T) {
	t.Parallel()
	c := secretstest.New(21)
	lines := secretLinesOf(c)
	w := newWorld(t)
	root := filepath.Join(w.home, "git")
	bare := filepath.Join(root, "remote.git")
	w.sh("git init -q --bare -b main " + bare)
	w.sh("git -C " + bare + " config http.receivepack true")
	pats := filepath.Join(w.home, "push-protection.txt")
	if err := os.WriteFile(pats, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := "#!/bin/sh\nwhile read old new ref; do\n  git rev-list --objects \"$new\" --not --all | while read sha rest; do\n" +
		"    if git cat-file -p \"$sha\" | grep -qF -f '" + pats + "'; then echo \"GH013: secret in $rest\" >&2; exit 1; fi\n" +
		"  done || exit 1\ndone\n"
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	srv := testutil.NewGitHTTPServer(t, root, "")
	w.sh("git remote add origin " + srv.URL("remote.git"))
	d := w.start()

	ledger, _ := os.ReadFile(w.path(c.Ledger))
	for p, s := range c.Files {
		if p == c.Ledger {
			s = string(ledger) + s
		}
		w.write(p, s)
	}
	wantHeld := slices.Sorted(slices.Values(append(slices.Clone(c.Dirty), c.Ledger)))
	var doc heldDoc
	remoteHas := func(p string) bool {
		_, err := testutil.Git{Env: w.env}.Run(bare, nil, "cat-file", "-e", "main:"+p)
		return err == nil
	}
	testutil.WaitFor(t, "the held files listed and the clean ones pushed", commitTimeout, func() bool {
		out, _ := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", "json")
		doc = heldDoc{}
		if json.Unmarshal([]byte(out), &doc) != nil {
			return false
		}
		var got []string
		for _, h := range doc.Held {
			if !slices.Contains(got, h.Path) {
				got = append(got, h.Path)
			}
		}
		slices.Sort(got)
		return slices.Equal(got, wantHeld) && strings.Contains(doc.Summary.Text, "held: secret") &&
			!slices.ContainsFunc(c.Clean, func(p string) bool { return !remoteHas(p) })
	}, d.Describe)
	for _, h := range doc.Held {
		if h.Reason != "secret" || h.Rule == "" || h.Line < 1 {
			t.Errorf("held entry %+v: want reason secret, a rule and a line", h)
		}
	}
	if want := "6 held: secret"; !strings.Contains(doc.Summary.Text, want) || len(wantHeld) != 6 {
		t.Errorf("status line %q, want %q", doc.Summary.Text, want)
	}
	remoteLedger, err := testutil.Git{Env: w.env}.Run(bare, nil, "show", "main:"+c.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range c.CleanRecords {
		if !strings.Contains(remoteLedger, `"`+id+`"`) {
			t.Errorf("the remote's ledger lacks clean record %s", id)
		}
	}
	for _, id := range c.DirtyRecords {
		if strings.Contains(remoteLedger, `"`+id+`"`) {
			t.Errorf("the remote's ledger has held record %s", id)
		}
	}
	m := d.Metrics(`memd_held_files{reason="secret"}`)
	if got := m[`memd_held_files{reason="secret"}`]; int(got) != len(wantHeld) {
		t.Errorf("memd_held_files{reason=secret} = %v, want %d", got, len(wantHeld))
	}
	n := 0
	for _, e := range w.events() {
		if strings.HasPrefix(e.Text, "held ") {
			n++
		}
	}
	if n != len(wantHeld) {
		t.Errorf("%d held events, want one per file (%d)", n, len(wantHeld))
	}
	// The writer removes one secret: the memory is committed and leaves held.
	cleaned := c.Dirty[0]
	w.write(cleaned, "<p>rotated; the key lives in the vault</p>\n")
	testutil.WaitFor(t, cleaned+" pushed once cleaned", commitTimeout, func() bool {
		out, err := testutil.Git{Env: w.env}.Run(bare, nil, "show", "main:"+cleaned)
		return err == nil && strings.Contains(out, "rotated")
	}, d.Describe)

	_, page, _ := d.Get("/")
	_, metricsText, _ := d.Get("/metrics")
	status, _ := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", "json")
	objects, err := testutil.Git{Env: w.env}.Run(bare, nil, "cat-file", "--batch-all-objects", "--batch")
	if err != nil {
		t.Fatal(err)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	stateFiles := ""
	_ = filepath.Walk(filepath.Join(w.repo, ".git", "memd"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			stateFiles += string(b)
		}
		return nil
	})
	for what, text := range map[string]string{"the log": d.Logs(), "the page": page, "/metrics": metricsText,
		"memd status": status, "the state directory": stateFiles, "the remote's objects": objects} {
		for _, l := range lines {
			if strings.Contains(text, l) {
				t.Errorf("%s carries a secret of the corpus", what)
				break
			}
		}
	}
	if strings.Contains(d.Logs(), "GH013") || strings.Contains(d.Logs(), "declined") {
		t.Errorf("a push was refused:\n%s", d.Logs())
	}
}
