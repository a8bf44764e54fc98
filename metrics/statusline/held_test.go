package statusline

import (
	"strings"
	"testing"
	"time"
)

// TestHeldWarns: held files make the line warn ("2 held: secret"), the document list them,
// and the sidebar section carry the long form naming each file, rule and line.
func TestHeldWarns(t *testing.T) {
	f := Facts{Now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), Held: []Held{
		{Path: "areas/a.html", Reason: HeldSecret, Rule: "aws-access-token", Line: 3},
		{Path: "memory.jsonl", Reason: HeldSecret, Rule: "github-pat", Line: 9},
		{Path: "memory.jsonl", Reason: HeldSecret, Rule: "slack-bot-token", Line: 12},
	}}
	d := Compose(f)
	if d.State != StateWarn || !strings.Contains(d.Summary.Text, "2 held: secret") {
		t.Fatalf("state %s, line %q", d.State, d.Summary.Text)
	}
	if len(d.Held) != 3 {
		t.Fatalf("document held %+v", d.Held)
	}
	var side []string
	for _, l := range d.Sections[0].Lines {
		side = append(side, l.Text)
	}
	all := strings.Join(side, "\n")
	for _, want := range []string{"areas/a.html (secret: aws-access-token line 3)", "memory.jsonl (secret: github-pat line 9, secret: slack-bot-token line 12)"} {
		if !strings.Contains(all, want) {
			t.Errorf("sidebar lacks %q:\n%s", want, all)
		}
	}
	f.Held = append(f.Held, Held{Path: "big.bin", Reason: HeldSize})
	if d := Compose(f); !strings.Contains(d.Summary.Text, "3 held: 2 secret, 1 size") {
		t.Errorf("line %q", d.Summary.Text)
	}
}
