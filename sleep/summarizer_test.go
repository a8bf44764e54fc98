package sleep

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
)

func script(t *testing.T, body string) []string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "summarize.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{p}
}

func testArc() memfile.Arc {
	d := func(s string) time.Time { v, _ := time.Parse("2006-01-02", s); return v }
	return memfile.Arc{Entity: "person:Sanju Rao", Year: 2025, Episodes: []memfile.ArcEpisode{
		{Path: "areas/x/20250101-a.html", Date: d("2025-01-01"), Title: "A", Gist: "a happened"},
		{Path: "areas/x/20250201-b.html", Date: d("2025-02-01"), Title: "B", Gist: "b happened"},
		{Path: "areas/x/20250301-c.html", Date: d("2025-03-01"), Title: "C", Gist: "c happened"},
	}}
}

func TestSummarizeReadsArcJSON(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "stdin.json")
	argv := script(t, `cat > "`+in+`"; echo "  Sanju kept checkout alive.  "`)
	got, err := Summarize(context.Background(), argv, 5*time.Second, nil, testArc(), "areas/arcs/person-sanju-rao-2025.html")
	if err != nil {
		t.Fatal(err)
	}
	if got != "Sanju kept checkout alive." {
		t.Errorf("summary %q", got)
	}
	js := readFile(t, dir, "stdin.json")
	for _, want := range []string{`"entity":"person:Sanju Rao"`, `"year":2025`, `"date":"2025-02-01"`, `"path":"areas/x/20250301-c.html"`} {
		mustContain(t, "arc JSON on stdin", js, want)
	}
}

func TestSummarizeFailuresAreContained(t *testing.T) {
	arc := testArc()
	t.Run("crash", func(t *testing.T) {
		_, err := Summarize(context.Background(), script(t, `echo oops >&2; exit 3`), 5*time.Second, nil, arc, "x")
		if err == nil || !strings.Contains(err.Error(), "oops") {
			t.Fatalf("crash: %v (want an error carrying stderr)", err)
		}
	})
	t.Run("10MB", func(t *testing.T) {
		start := time.Now()
		_, err := Summarize(context.Background(), script(t, `head -c 10485760 /dev/zero | tr '\0' a`), 20*time.Second, nil, arc, "x")
		if !errors.Is(err, ErrSummaryTooLong) {
			t.Fatalf("10 MB: %v", err)
		}
		if time.Since(start) > 15*time.Second {
			t.Errorf("10 MB took %s: the cap should kill it, not wait for the timeout", time.Since(start))
		}
	})
	t.Run("missing command", func(t *testing.T) {
		if _, err := Summarize(context.Background(), []string{"/nonexistent/summarizer"}, time.Second, nil, arc, "x"); err == nil {
			t.Fatal("no error for a missing command")
		}
	})
	t.Run("hang with a forked child", func(t *testing.T) {
		pidFile := filepath.Join(t.TempDir(), "child.pid")
		argv := script(t, `sleep 1000 & echo $! > "`+pidFile+`"; sleep 1000`)
		start := time.Now()
		_, err := Summarize(context.Background(), argv, 500*time.Millisecond, nil, arc, "x")
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("hang: %v", err)
		}
		if el := time.Since(start); el > 10*time.Second {
			t.Fatalf("hang took %s", el)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		// The grandchild was in the group: it must die (gone, or a zombie awaiting reaping).
		var st []byte
		testutil.WaitFor(t, "the forked child "+strconv.Itoa(pid)+" to die", 5*time.Second, func() bool {
			var err error
			st, err = os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			return err != nil || strings.Contains(string(st), ") Z ")
		}, func() string { return string(st) })
	})
}

// In a run: a summarizer that prints HTML is escaped (the arc stays valid); one that crashes
// leaves the deterministic arc.
func TestArcsWithSummarizer(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       string
		failed     int
	}{
		{"html", `cat >/dev/null; echo '<script>alert(1)</script> & <b>bold</b>'`, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;", 0},
		{"crash", `exit 7`, "person:Sanju Rao", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, day := range []string{"01", "02", "03"} {
				testutil.WriteFile(t, dir, "areas/x/202501"+day+"-e"+strconv.Itoa(i)+".html",
					mem{typ: "episodic", title: "E" + day, entities: []string{sanju}, created: "2025-01-" + day + "T00:00:00Z"}.html())
			}
			initRepo(t, dir)
			store := openStore(t, dir)
			cfg := testConfig()
			cfg.Arcs.Summarizer.Command = script(t, c.body)
			rep := runSleep(t, dir, store, cfg, func(o *Options) { o.Phases = []memd.Phase{"arcs"} })
			if rep.Failed() || rep.Phases[0].Counts["created"] != 1 || rep.Phases[0].Counts["summarizer_failed"] != c.failed {
				t.Fatalf("%+v", rep.Phases[0])
			}
			arc := readFile(t, dir, "areas/arcs/person-sanju-rao-2025.html")
			if m := memfile.ParseBytes([]byte(arc)); !m.Valid() {
				t.Fatalf("arc invalid: %v\n%s", m.Violations, arc)
			}
			mustContain(t, "arc", arc, c.want)
			mustNotContain(t, "arc", arc, "<script>")
		})
	}
}

// The summarizer gets the hooks' environment rule: the push token never reaches it, even
// when hooks.env names it; hooks.env's other names do. On main it inherited everything.
func TestSummarizerEnvironmentIsScrubbed(t *testing.T) {
	t.Setenv("MEMD_GIT_TOKEN", "ghp_default")
	t.Setenv("HOSTILE_TOKEN", "ghp_configured")
	t.Setenv("ANTHROPIC_API_KEY", "sk-allowed")
	t.Setenv("UNLISTED", "no")
	cfg := memd.DefaultConfig()
	cfg.Sync.TokenEnv = "HOSTILE_TOKEN"
	cfg.Hooks.Env = []string{"ANTHROPIC_API_KEY", "HOSTILE_TOKEN", "MEMD_GIT_TOKEN"}
	got, err := Summarize(context.Background(), script(t, `env | sort | tr '\n' ' '`), 5*time.Second, summarizerEnv(cfg), testArc(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got, "ghp_") || strings.Contains(got, "UNLISTED") || !strings.Contains(got, "ANTHROPIC_API_KEY=sk-allowed") || !strings.Contains(got, "PATH=") {
		t.Fatalf("summarizer environment: %s", got)
	}
}
