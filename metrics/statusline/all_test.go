package statusline_test

import (
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

func named(name, state string) statusline.Named {
	d := statusline.Compose(statuslinetest.Fixtures()[state])
	return statusline.Named{Name: name, Repo: "/home/u/" + name, Doc: &d}
}

// The worst state comes first and sets the document's state; a stale document reads "not
// running"; a repo memd never ran on reads "not started".
func TestAllWorstFirst(t *testing.T) {
	now := statuslinetest.Now
	alive := func(int) bool { return true }
	stale := named("old", statusline.StateOK)
	stale.Doc.UpdatedAt = now.Add(-time.Hour)
	d := statusline.All([]statusline.Named{
		named("memory", statusline.StateOK), named("work", statusline.StateOffline), stale,
		{Name: "fresh", Repo: "/home/u/fresh"}, named("projects", statusline.StateError),
	}, now, func(pid int) bool { return alive(pid) && false })
	if d.State != statusline.StateError {
		t.Fatalf("state %s, want the worst (error)", d.State)
	}
	for _, want := range []string{"memd: projects error: push origin/main", "work +2 ~1 offline, 3 ahead", "old not running", "fresh not started", "memory +2 ~1"} {
		if !strings.Contains(d.Summary.Text+" "+d.Detail, want) && !strings.Contains(joinLines(d), want) {
			t.Errorf("missing %q in %q / %q", want, d.Summary.Text, joinLines(d))
		}
	}
	if i, j := strings.Index(joinLines(d), "projects"), strings.Index(joinLines(d), "memory"); i < 0 || j < i {
		t.Errorf("error repo not first: %q", joinLines(d))
	}
	if n := len([]rune(d.Summary.Text)); n > statusline.AllMaxWidth {
		t.Errorf("line is %d columns: %q", n, d.Summary.Text)
	}
	if !strings.Contains(d.Summary.Text, "more") {
		t.Errorf("five repos in 80 columns must fold the rest: %q", d.Summary.Text)
	}
	for _, f := range statusline.Formats {
		if out, err := statusline.Render(&d, f, now, alive); err != nil || out == "" {
			t.Errorf("render %s: %q %v", f, out, err)
		}
	}
	if none := statusline.All(nil, now, alive); none.Summary.Text != "memd: no repos" {
		t.Errorf("no repos: %q", none.Summary.Text)
	}
	ok := statusline.All([]statusline.Named{named("memory", statusline.StateOK)}, now, alive)
	if ok.State != statusline.StateOK || ok.Summary.Text != "memd: memory +2 ~1 · 14:32" {
		t.Errorf("one repo: %s %q", ok.State, ok.Summary.Text)
	}
}

func joinLines(d statusline.Document) string {
	var s []string
	for _, l := range d.Sections[0].Lines {
		s = append(s, l.Text)
	}
	return strings.Join(s, " | ")
}
