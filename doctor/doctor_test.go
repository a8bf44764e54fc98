package doctor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/demo"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func findings(rep *Report, check string) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Check == check {
			out = append(out, f)
		}
	}
	return out
}

// A clean repo: the demo after its project MEMORY.md is put in the template. Each broken
// thing added to it is found, named, and counted as a problem or a warning.
func TestDoctorFindsEachProblem(t *testing.T) {
	root := t.TempDir()
	if _, err := demo.Generate(root, demo.Options{Memories: 120, Now: now, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	for _, md := range []string{"projects/checkout-api/MEMORY.md", "projects/payments/MEMORY.md"} {
		p := filepath.Join(root, md)
		if data, err := os.ReadFile(p); err == nil {
			if err := os.WriteFile(p, memorymd.RepairProject(data, "x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	base, err := Check(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if base.Problems != 0 {
		t.Fatalf("clean demo has problems: %+v", base.Findings)
	}
	if base.Memories != 120 {
		t.Fatalf("memories = %d, want 120", base.Memories)
	}

	// Each of these must be found.
	testutil.WriteFile(t, root, "areas/broken.html", "<html><head><title>x</title></head><body>no article</body></html>")
	testutil.WriteFile(t, root, "areas/linker.html", strings.Replace(validMemory("linker"), "</head>",
		`<link rel="memhtml-supersedes" href="/areas/gone.html"></head>`, 1))
	testutil.WriteFile(t, root, "notes/stray.html", validMemory("stray")) // outside the four buckets: a warning
	testutil.WriteFile(t, root, "areas/dup-a.html", validMemory("duplicated"))
	testutil.WriteFile(t, root, "projects/p/dup-b.html", validMemory("duplicated"))
	testutil.WriteFile(t, root, "archive/2020/areas/dup-a.html", validMemory("duplicated")) // archived: no clash
	// memhtml's own files are not memories: never a problem, never counted.
	testutil.WriteFile(t, root, "areas/inbox/index.html", "<html><body><ul><li>listing</li></ul></body></html>")
	testutil.WriteFile(t, root, "sitemap.xml", "<urlset/>")
	testutil.WriteFile(t, root, "README.html", "<html><body><h1>memory repo</h1></body></html>")
	testutil.WriteFile(t, root, ".memhtml/sleep/run-1.html", "<html><body><h1>report</h1></body></html>")
	testutil.WriteFile(t, root, "areas/arcs/not-an-arc.html", validMemory("not an arc"))
	ledger, _ := os.ReadFile(filepath.Join(root, "memory.jsonl"))
	testutil.WriteFile(t, root, "memory.jsonl", string(ledger)+"{this is not json\n")
	idx, _ := os.ReadFile(filepath.Join(root, "MEMORY.md"))
	testutil.WriteFile(t, root, "MEMORY.md", string(idx)+"- [[areas/nowhere.html|Nowhere]] · type:semantic subject:x · gone\n")
	testutil.WriteFile(t, root, "projects/p/MEMORY.md", "# p\n\n## CRITICAL RULES\n- a\n\n## Random\n- b\n")
	// A stale lock: a pid that has exited, on this host.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	testutil.WriteFile(t, root, ".memory.lock", fmt.Sprintf("pid: %d\nhostname: %s\nacquired_at: 2026-11-30T00:00:00Z\n", cmd.Process.Pid, host))

	rep, err := Check(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ check, path, text string }{
		{"memory", "areas/broken.html", "article"},
		{"link", "areas/linker.html", "/areas/gone.html"},
		{"path", "notes/stray.html", "outside the four buckets"},
		{"duplicate", "areas/dup-a.html", "projects/p/dup-b.html"},
		{"placement", "areas/arcs/not-an-arc.html", "arcs"},
		{"ledger", "memory.jsonl", "does not parse"},
		{"index", "MEMORY.md", "areas/nowhere.html"},
		{"memory_md", "projects/p/MEMORY.md", "template"},
		{"lock", ".memory.lock", "stale"},
	}
	for _, w := range want {
		found := false
		for _, f := range findings(rep, w.check) {
			if f.Path == w.path && strings.Contains(f.Message, w.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s finding for %s mentioning %q; findings: %+v", w.check, w.path, w.text, findings(rep, w.check))
		}
	}
	for _, f := range rep.Findings {
		if f.Path == "notes/stray.html" && f.Severity != Warning {
			t.Errorf("a memory outside the buckets is a warning, not a problem: %+v", f)
		}
		if strings.Contains(f.Path, "index.html") || f.Path == "README.html" || strings.HasPrefix(f.Path, ".memhtml/") || strings.Contains(f.Message, "archive/2020") {
			t.Errorf("a finding on a non-memory or an archived file: %+v", f)
		}
	}
	if rep.Memories != base.Memories+6 || rep.Inbox != base.Inbox {
		t.Errorf("memories %d (want %d), inbox %d (want %d): non-memories counted", rep.Memories, base.Memories+6, rep.Inbox, base.Inbox)
	}
	if rep.Problems < 7 {
		t.Errorf("problems = %d, want >= 7", rep.Problems)
	}
	// Doctor is read-only: the broken files are left exactly as they were.
	if got, _ := os.ReadFile(filepath.Join(root, "memory.jsonl")); !strings.HasSuffix(string(got), "{this is not json\n") {
		t.Error("doctor changed the ledger")
	}
}

func TestDoctorInboxThreshold(t *testing.T) {
	root := t.TempDir()
	for i := 0; i <= statusline.InboxWarnAbove; i++ {
		testutil.WriteFile(t, root, fmt.Sprintf("areas/inbox/m%02d.html", i), validMemory(fmt.Sprintf("m%d", i)))
	}
	rep, err := Check(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Inbox != statusline.InboxWarnAbove+1 || len(findings(rep, "inbox")) != 1 || rep.Problems != 0 {
		t.Fatalf("inbox %d findings %+v", rep.Inbox, rep.Findings)
	}
	// At the threshold itself: no warning.
	os.Remove(filepath.Join(root, "areas/inbox/m00.html"))
	rep, _ = Check(root, Options{})
	if len(findings(rep, "inbox")) != 0 {
		t.Fatalf("warned at exactly %d: %+v", statusline.InboxWarnAbove, rep.Findings)
	}
}

func validMemory(title string) string {
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>` + title + `</title>
<meta name="memhtml-type" content="semantic">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-01-02T10:00:00Z">
<meta name="memhtml-updated" content="2026-01-02T10:00:00Z">
</head><body><article><p><mark>` + title + ` is a fact.</mark></p></article></body></html>
`
}

func BenchmarkDoctor10k(b *testing.B) {
	root := b.TempDir()
	if _, err := demo.Generate(root, demo.Options{Memories: 10000, Now: now, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Check(root, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
