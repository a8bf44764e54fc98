// Command sleep benchmarks memd's sleep against git on identical copies of a demo repo and
// prints a Markdown table of ratios:
//
//   - full sleep (expire, arcs, archive, tidy; archiving ~n/10 files and writing arcs) vs
//     `git mv` of the same files + one `git commit`;
//   - a night with nothing to do (every phase plans the whole tree from the parse cache) vs
//     `git status --porcelain`: the first of each after the full run, then the steady state
//     (interleaved, medians of 3), then one after 100 new memories that need nothing, then
//     the same without the parse cache (every memory file parsed: what the cache saves);
//   - expire on a -ledger line memory.jsonl vs decoding and re-encoding every line with
//     encoding/json.
//
// Usage: go run ./bench/sleep -n 100000 -ledger 100000
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/demo"
	"github.com/memd-dev/memd/sleep"
	"github.com/memd-dev/memd/sync/gitrepo"
)

var now = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

func main() {
	n := flag.Int("n", 10000, "memories in the demo repo")
	ledgerLines := flag.Int("ledger", 100000, "lines in the expire benchmark's ledger")
	extraArcs := flag.Int("arcs", 1000, "extra entities with 3 episodes each this year, so the full sleep writes about this many more arcs")
	work := flag.String("dir", "", "work directory (default: a temp dir, removed after)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the full sleep here (and of the idle runs to <file>.idle1, <file>.idle, <file>.idle-writes, <file>.no-cache)")
	flag.Parse()
	log.SetFlags(0)

	root := *work
	if root == "" {
		d, err := os.MkdirTemp("", "memd-bench-sleep")
		check(err)
		defer os.RemoveAll(d)
		root = d
	}
	src := filepath.Join(root, "src")
	t0 := time.Now()
	st, err := demo.Generate(src, demo.Options{Memories: *n, Now: now, Seed: 1})
	check(err)
	check(writeArcEpisodes(src, *extraArcs))
	git(src, "init", "-q", "-b", "main")
	git(src, "add", "-A")
	// No background auto-gc racing the copies below; pack once, as a lived-in repo is.
	git(src, "-c", "gc.auto=0", "commit", "-q", "-m", "demo")
	git(src, "gc", "-q")
	log.Printf("demo repo: %d memories (%d episodes) in %s", st.Memories, st.Episodes, time.Since(t0).Round(time.Millisecond))
	memdDir, gitDir := filepath.Join(root, "memd"), filepath.Join(root, "git")
	run("cp", "-a", src, memdDir)
	run("cp", "-a", src, gitDir)

	// Full sleep.
	repo, err := gitrepo.Open(memdDir, gitrepo.Options{Now: func() time.Time { return now }})
	check(err)
	cfg := memd.DefaultConfig()
	cfg.Repo = memdDir
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		check(err)
		check(pprof.StartCPUProfile(f))
	}
	runtime.GC()
	c0 := cpuTime()
	t0 = time.Now()
	rep, err := sleep.NewRunner(memdDir, repo, sleep.Options{Config: cfg, Now: func() time.Time { return now }, NoGC: true}).Run(context.Background(), "bench-1")
	full, fullCPU := time.Since(t0), cpuTime()-c0
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	check(err)
	if rep.Failed() {
		log.Fatalf("sleep failed: %+v", rep)
	}
	var moves []string
	for _, p := range rep.Phases {
		log.Printf("  %-8s %8s  %v", p.Name, p.Duration.Round(time.Millisecond), p.Counts)
		for _, it := range p.Items {
			if it.Action == "move" {
				moves = append(moves, it.Path, it.To)
			}
		}
	}
	repo.WaitIndexRefresh()

	// git: the same moves with git mv, then one commit.
	t0 = time.Now()
	for i := 0; i < len(moves); i += 2 {
		check(os.MkdirAll(filepath.Join(gitDir, filepath.Dir(moves[i+1])), 0o755))
	}
	// git mv takes many sources into one directory: one call per destination directory
	// (in chunks, to stay under the argument limit), as a careful script would.
	byDir := map[string][]string{}
	var dirs []string
	for i := 0; i < len(moves); i += 2 {
		d := filepath.Dir(moves[i+1])
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], moves[i])
	}
	for _, d := range dirs {
		srcs := byDir[d]
		for len(srcs) > 0 {
			k := min(len(srcs), 1000)
			git(gitDir, append(append([]string{"mv"}, srcs[:k]...), d+"/")...)
			srcs = srcs[k:]
		}
	}
	git(gitDir, "commit", "-q", "-m", "archive")
	gitMv := time.Since(t0)

	// Idle sleep vs git status: the first idle run after the full one re-reads the files the
	// full run wrote (parse cache misses); the second is the steady nightly state. Each run
	// reports its wall and CPU time (user+system of the process: steadier on a busy machine).
	type timed struct{ wall, cpu time.Duration }
	idleRun := func(id string) timed {
		runtime.GC()
		c0, t0 := cpuTime(), time.Now()
		rep, err := sleep.NewRunner(memdDir, repo, sleep.Options{Config: cfg, Now: func() time.Time { return now }, NoGC: true}).Run(context.Background(), id)
		d := timed{time.Since(t0), cpuTime() - c0}
		check(err)
		for _, p := range rep.Phases {
			if p.Commit != "" {
				log.Fatalf("idle run committed in %s", p.Name)
			}
		}
		log.Printf("idle run %s: wall %s, CPU %s", id, ms(d.wall), ms(d.cpu))
		return d
	}
	profiled := func(suffix string, f func() timed) timed {
		if *cpuprofile == "" {
			return f()
		}
		out, err := os.Create(*cpuprofile + suffix)
		check(err)
		check(pprof.StartCPUProfile(out))
		defer pprof.StopCPUProfile()
		return f()
	}
	gitStatus := func() time.Duration {
		t0 := time.Now()
		git(memdDir, "status", "--porcelain")
		return time.Since(t0)
	}
	time.Sleep(2100 * time.Millisecond) // past the racy window of the files the full run wrote
	// Each "first after the full run": memd's first idle run re-reads what the full run
	// wrote or moved; git's first status refreshes the index for the same files.
	idle1 := profiled(".idle1", func() timed { return idleRun("bench-2") })
	status1 := gitStatus()
	// Steady state: idle sleep and git status interleaved, medians of 3.
	var idles []timed
	var statuses []time.Duration
	for i := range 3 {
		idles = append(idles, profiled(".idle", func() timed { return idleRun(fmt.Sprintf("bench-3-%d", i)) }))
		statuses = append(statuses, gitStatus())
	}
	slices.SortFunc(idles, func(a, b timed) int { return int(a.wall - b.wall) })
	idle, status := idles[len(idles)/2], median(statuses)
	// A night after a day of writes with nothing for sleep to do: the new files are parsed,
	// the rest comes from the parse cache.
	const written = 100
	check(writeSemantic(memdDir, "bench-facts", written))
	time.Sleep(2100 * time.Millisecond) // past the racy window of those writes
	idleWrites := profiled(".idle-writes", func() timed { return idleRun("bench-4") })
	statusWrites := gitStatus()
	// The same night without the parse cache: every memory file parsed (what the cache
	// saves a night).
	check(writeSemantic(memdDir, "bench-facts-2", written))
	check(os.Remove(filepath.Join(memdDir, ".git", "memd", "sleep-parse.bin")))
	time.Sleep(2100 * time.Millisecond)
	noCache := profiled(".no-cache", func() timed { return idleRun("bench-5") })
	statusNoCache := gitStatus()
	repo.Close()

	// Expire on a big ledger.
	led := filepath.Join(root, "ledger")
	check(os.MkdirAll(led, 0o755))
	data := genLedger(*ledgerLines)
	check(os.WriteFile(filepath.Join(led, "memory.jsonl"), data, 0o644))
	git(led, "init", "-q", "-b", "main")
	git(led, "add", "-A")
	git(led, "commit", "-q", "-m", "ledger")
	lrepo, err := gitrepo.Open(led, gitrepo.Options{Now: func() time.Time { return now }})
	check(err)
	cfg.Repo = led
	runtime.GC()
	c0 = cpuTime()
	t0 = time.Now()
	rep3, err := sleep.NewRunner(led, lrepo, sleep.Options{Config: cfg, Phases: []memd.Phase{memd.PhaseExpire}, Now: func() time.Time { return now }, NoGC: true}).Run(context.Background(), "bench-6")
	expire, expireCPU := time.Since(t0), cpuTime()-c0
	check(err)
	lrepo.WaitIndexRefresh()
	lrepo.Close()
	runtime.GC()
	t0 = time.Now()
	jsonRoundTrip(data)
	js := time.Since(t0)

	archived, arcs := rep.Counts["archived"], rep.Counts["arcs"]
	fmt.Printf("\n%d memories (%d episodes); full sleep archived %d files, wrote %d arcs; ledger %d lines, %d drained.\n\n",
		st.Memories, st.Episodes, archived, arcs, *ledgerLines, rep3.Counts["expired"])
	fmt.Println("| case | memd | memd CPU | baseline | baseline is | ratio memd/baseline |")
	fmt.Println("| --- | ---: | ---: | ---: | --- | ---: |")
	row := func(name string, m timed, b time.Duration, what string) {
		cpu := "-"
		if m.cpu > 0 {
			cpu = ms(m.cpu)
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %.2f |\n", name, ms(m.wall), cpu, ms(b), what, float64(m.wall)/float64(b))
	}
	row("full sleep (4 phases, 4 commits)", timed{full, fullCPU}, gitMv, fmt.Sprintf("`git mv` x%d + `git commit`", len(moves)/2))
	row("idle sleep, first after the full run", idle1, status1, "`git status --porcelain`, first after the full run (refreshes the index)")
	row("idle sleep (nothing to do), steady, median of 3", idle, status, "`git status --porcelain`, median of 3, interleaved")
	row(fmt.Sprintf("idle sleep after %d new memories (nothing to do)", written), idleWrites, statusWrites, "`git status --porcelain` right after")
	row(fmt.Sprintf("idle sleep after %d more new memories, no parse cache (every memory file parsed)", written), noCache, statusNoCache, "`git status --porcelain` right after")
	row("expire phase (plan, apply, commit), ledger of "+fmt.Sprint(*ledgerLines)+" lines", timed{expire, expireCPU}, js, "encoding/json decode+encode per line")
}

// cpuTime is the process's user+system CPU time (on a busy machine the steadier figure).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// writeArcEpisodes writes 3 episodic memories for each of k entities in the current year.
func writeArcEpisodes(dir string, k int) error {
	for e := 0; e < k; e++ {
		for d := 1; d <= 3; d++ {
			day := fmt.Sprintf("2026%02d%02d", 1+e%11, d)
			rel := fmt.Sprintf("areas/bench/%s-team-%04d-%d.html", day, e, d)
			created := fmt.Sprintf("%s-%s-%sT10:00:00Z", day[:4], day[4:6], day[6:])
			html := fmt.Sprintf(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Team %04d stand-up %d</title>
<meta name="memhtml-type" content="episodic">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="%s">
<meta name="memhtml-updated" content="%s">
<meta name="memhtml-entity" content="team:bench-%04d">
</head>
<body>
<article>
<p><mark>Team %04d held stand-up %d.</mark></p>
</article>
</body>
</html>
`, e, d, created, created, e, e, d)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeSemantic writes k semantic memories that no phase acts on (no date, no expiry)
// into resources/<sub>.
func writeSemantic(dir, sub string, k int) error {
	for i := 0; i < k; i++ {
		html := fmt.Sprintf(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Fact %04d</title>
<meta name="memhtml-type" content="semantic">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-11-29T10:00:00Z">
<meta name="memhtml-updated" content="2026-11-29T10:00:00Z">
</head>
<body>
<article>
<p><mark>Fact %04d holds.</mark></p>
</article>
</body>
</html>
`, i, i)
		p := filepath.Join(dir, "resources", sub, fmt.Sprintf("fact-%04d.html", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// genLedger writes n records: mostly rules/lessons/persistent notes, a tenth expiring.
func genLedger(n int) []byte {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	for i := 0; i < n; i++ {
		var lc string
		switch i % 10 {
		case 0:
			lc = `,"lifecycle":{"mode":"hard-expiry","expiresAt":"2025-06-01T00:00:00Z"}`
		case 1:
			lc = `,"lifecycle":{"mode":"soft-expiry","expiresAt":"2027-06-01T00:00:00Z"}`
		case 2:
			lc = `,"lifecycle":{"mode":"read-count","remainingReads":3}`
		case 3, 4:
			lc = `,"lifecycle":{"mode":"persistent"}`
		}
		typ := "note"
		if lc == "" {
			typ = []string{"rule", "lesson"}[i%2]
		}
		fmt.Fprintf(w, `{"id":"rec-%06d","type":"%s","role":"dev","text":"record number %d about the checkout service and its rollback order","createdAt":"2025-01-01T00:00:00Z","context":["projects/checkout/**"],"repos":["shop"]%s}`+"\n", i, typ, i, lc)
	}
	w.Flush()
	return b.Bytes()
}

// jsonRoundTrip decodes and re-encodes every line with encoding/json (the baseline).
func jsonRoundTrip(data []byte) {
	var out bytes.Buffer
	for _, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte{'\n'}) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			continue
		}
		b, err := json.Marshal(m)
		check(err)
		out.Write(b)
		out.WriteByte('\n')
	}
}

func git(dir string, args ...string) string {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@b")
	out, err := cmd.CombinedOutput()
	if err != nil {
		log.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func run(name string, args ...string) {
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		log.Fatalf("%s: %v\n%s", name, err, out)
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
