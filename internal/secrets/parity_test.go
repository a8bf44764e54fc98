package secrets

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/secrets/secretstest"
	"github.com/memd-dev/memd/internal/testutil"
)

// cliFinding is what gitleaks' JSON report says of a finding (the fields compared).
type cliFinding struct {
	Commit    string
	RuleID    string
	File      string
	StartLine int
}

// runGitleaks runs the real CLI on dir (`gitleaks dir`, or `gitleaks git` with git) and
// returns its findings, paths relative to dir.
func runGitleaks(t *testing.T, dir string, git bool, extra ...string) []cliFinding {
	t.Helper()
	bin := testutil.Gitleaks(t)
	report := filepath.Join(t.TempDir(), "report.json")
	mode := "dir"
	if git {
		mode = "git"
	}
	args := append([]string{mode, ".", "--no-banner", "--exit-code", "0", "--report-format", "json", "--report-path", report}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var fs []cliFinding
	if err := json.Unmarshal(b, &fs); err != nil {
		t.Fatalf("gitleaks report: %v", err)
	}
	for i := range fs {
		fs[i].File = strings.TrimPrefix(filepath.ToSlash(fs[i].File), "./")
	}
	return fs
}

func writeCorpus(t *testing.T, c *secretstest.Corpus) string {
	t.Helper()
	dir := t.TempDir()
	for p, s := range c.Files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// recordsAt maps ledger line numbers to record ids.
func recordsAt(t *testing.T, ledger string, lines []int) []string {
	t.Helper()
	all := strings.Split(ledger, "\n")
	var ids []string
	for _, n := range lines {
		if n < 1 || n > len(all) {
			t.Fatalf("line %d is not in the ledger (%d lines)", n, len(all))
		}
		id := recordID([]byte(all[n-1]))
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// TestParityWithGitleaksCLI: on the corpus, memd's guard holds exactly the memories and
// ledger records the gitleaks CLI reports, the memories with the same rule and line.
func TestParityWithGitleaksCLI(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := secretstest.New(seed)
			dir := writeCorpus(t, c)
			cli := runGitleaks(t, dir, false)
			g := NewGuard(dir, c.Ledger, "")
			var cliFiles, cliMemd, memdFiles []string
			var cliLedgerLines, memdLedgerLines []int
			for _, f := range cli {
				if f.File == c.Ledger {
					cliLedgerLines = append(cliLedgerLines, f.StartLine)
					continue
				}
				cliFiles = appendNew(cliFiles, f.File)
				cliMemd = append(cliMemd, fmt.Sprintf("%s:%s:%d", f.File, f.RuleID, f.StartLine))
			}
			var memdFindings []string
			for p, s := range c.Files {
				v, err := g.Vet(p, []byte(s), func() ([]byte, error) { return nil, nil })
				if err != nil {
					t.Fatal(err)
				}
				if p == c.Ledger {
					if v.Hold || v.Content == nil && len(v.Findings) > 0 {
						t.Fatalf("the ledger is held whole: %+v", v)
					}
					for _, f := range v.Findings {
						memdLedgerLines = append(memdLedgerLines, f.Line)
					}
					continue
				}
				if v.Hold != (len(v.Findings) > 0) {
					t.Fatalf("%s: hold %v with %d findings", p, v.Hold, len(v.Findings))
				}
				if v.Hold {
					memdFiles = appendNew(memdFiles, p)
				}
				for _, f := range v.Findings {
					memdFindings = append(memdFindings, fmt.Sprintf("%s:%s:%d", p, f.Rule, f.Line))
				}
			}
			sort.Strings(cliFiles)
			sort.Strings(memdFiles)
			sort.Strings(cliMemd)
			sort.Strings(memdFindings)
			if !slices.Equal(cliFiles, c.Dirty) {
				t.Errorf("gitleaks flags %v, the corpus has secrets in %v", cliFiles, c.Dirty)
			}
			if !slices.Equal(memdFiles, cliFiles) {
				t.Errorf("memd holds %v, gitleaks reports %v", memdFiles, cliFiles)
			}
			if !slices.Equal(memdFindings, cliMemd) {
				t.Errorf("findings differ:\nmemd     %v\ngitleaks %v", memdFindings, cliMemd)
			}
			ledger := c.Files[c.Ledger]
			cliRecs, memdRecs := recordsAt(t, ledger, cliLedgerLines), recordsAt(t, ledger, memdLedgerLines)
			want := slices.Sorted(slices.Values(c.DirtyRecords))
			if !slices.Equal(cliRecs, want) {
				t.Errorf("gitleaks flags records %v, the corpus has secrets in %v", cliRecs, want)
			}
			if !slices.Equal(memdRecs, cliRecs) {
				t.Errorf("memd holds records %v, gitleaks reports %v", memdRecs, cliRecs)
			}
		})
	}
}

func appendNew(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

// TestParityAllowConventions: an inline gitleaks:allow and a .gitleaksignore fingerprint
// let a finding through in memd as in the CLI.
func TestParityAllowConventions(t *testing.T) {
	c := secretstest.New(7)
	// gitleaks:allow on the secret's line of one memory; a fingerprint for another's.
	allowed := "areas/leak-github.html"
	c.Files[allowed] = strings.Replace(c.Files[allowed], c.Secrets[1], c.Secrets[1]+" <!-- gitleaks:allow -->", 1)
	dir := writeCorpus(t, c)
	cli := runGitleaks(t, dir, false)
	var fp string
	for _, f := range cli {
		if f.File == "areas/leak-slack.html" {
			fp = fmt.Sprintf("%s:%s:%d", f.File, f.RuleID, f.StartLine)
		}
		if f.File == allowed {
			t.Fatalf("gitleaks reports the line with gitleaks:allow: %+v", f)
		}
	}
	if fp == "" {
		t.Fatal("gitleaks found nothing in the slack memory")
	}
	if err := os.WriteFile(filepath.Join(dir, IgnoreFile), []byte("# reviewed\n"+fp+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli = runGitleaks(t, dir, false)
	g := NewGuard(dir, c.Ledger, "")
	for _, p := range append(append([]string{}, c.Dirty...), c.Clean...) {
		v, err := g.Vet(p, []byte(c.Files[p]), func() ([]byte, error) { return nil, nil })
		if err != nil {
			t.Fatal(err)
		}
		inCLI := slices.ContainsFunc(cli, func(f cliFinding) bool { return f.File == p })
		if v.Hold != inCLI {
			t.Errorf("%s: memd holds %v, gitleaks reports %v", p, v.Hold, inCLI)
		}
		if (p == allowed || p == "areas/leak-slack.html") && v.Hold {
			t.Errorf("%s is allowed, memd holds it", p)
		}
	}
}

// TestHistoryParityWithGitleaksCLI: ScanHistory (memd doctor --secrets) names the same
// commit, path, rule and line for each finding as `gitleaks git` on a history that adds the
// corpus, adds a second secret to a memory later and removes one.
func TestHistoryParityWithGitleaksCLI(t *testing.T) {
	c := secretstest.New(5)
	dir := writeCorpus(t, c)
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "corpus")
	more := secretstest.New(6)
	p := c.Dirty[1]
	if err := os.WriteFile(filepath.Join(dir, p), []byte(c.Files[p]+"<p>and later</p>\n"+more.Secrets[2]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, c.Dirty[0])); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "more")
	cli := runGitleaks(t, dir, true)
	rs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ScanHistory(context.Background(), dir, rs)
	if err != nil {
		t.Fatal(err)
	}
	var want, have []string
	for _, f := range cli {
		want = append(want, fmt.Sprintf("%s:%s:%s:%d", f.Commit, f.File, f.RuleID, f.StartLine))
	}
	for _, f := range got {
		have = append(have, fmt.Sprintf("%s:%s:%s:%d", f.Commit, f.Path, f.Rule, f.Line))
	}
	sort.Strings(want)
	sort.Strings(have)
	if len(want) < len(c.Secrets)*2 {
		t.Fatalf("gitleaks git found only %d findings: %v", len(want), want)
	}
	if !slices.Equal(have, want) {
		t.Errorf("history findings differ:\nmemd     %v\ngitleaks %v", have, want)
	}
}
