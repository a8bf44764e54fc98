package secrets

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/secrets/secretstest"
)

// TestLedgerHeldRecords: in the ledger only the new or changed records are scanned; a new
// record with a secret is left out of the committed version, a changed one keeps HEAD's
// version in its place, the others go in as written; the findings name the file's lines; a
// .gitleaksignore fingerprint of one lets it through.
func TestLedgerHeldRecords(t *testing.T) {
	c := secretstest.New(4)
	rec := func(id, text string) string {
		return fmt.Sprintf(`{"id":%q,"type":"note","text":%q}`+"\n", id, text)
	}
	head := rec("a", "old a") + rec("b", "plain b") + rec("c", "plain c")
	work := rec("a", "old a") + rec("b", "b now has "+c.Secrets[0]) + rec("c", "plain c") +
		rec("d", "new clean d") + rec("e", "new e with "+c.Secrets[1])
	dir := t.TempDir()
	g := NewGuard(dir, "memory.jsonl", "")
	v, err := g.Vet("memory.jsonl", []byte(work), func() ([]byte, error) { return []byte(head), nil })
	if err != nil {
		t.Fatal(err)
	}
	want := rec("a", "old a") + rec("b", "plain b") + rec("c", "plain c") + rec("d", "new clean d")
	if v.Hold || string(v.Content) != want {
		t.Fatalf("hold %v, committed:\n%s\nwant:\n%s", v.Hold, v.Content, want)
	}
	var lines []int
	for _, f := range v.Findings {
		lines = append(lines, f.Line)
	}
	if fmt.Sprint(lines) != "[2 5]" {
		t.Fatalf("findings %+v, want lines 2 and 5", v.Findings)
	}
	for _, s := range c.Secrets {
		if strings.Contains(string(v.Content), s) || strings.Contains(fmt.Sprint(v.Findings), s) {
			t.Fatal("a secret in what is committed or reported")
		}
	}
	fp := fmt.Sprintf("memory.jsonl:%s:5\n", v.Findings[1].Rule)
	if err := os.WriteFile(filepath.Join(dir, IgnoreFile), []byte(fp), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err = g.Vet("memory.jsonl", []byte(work), func() ([]byte, error) { return []byte(head), nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Findings) != 1 || v.Findings[0].Line != 2 || !strings.Contains(string(v.Content), `"id":"e"`) {
		t.Fatalf("with the fingerprint of line 5: %+v\n%s", v.Findings, v.Content)
	}
}
