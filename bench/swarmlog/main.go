// Command swarmlog says where the swarm row's time to one HEAD goes, from the daemons' debug
// logs that TestReliabilitySwarm writes with MEMD_SWARM_LOGS=dir (machine-N.log):
//
//	MEMD_SWARM_LOGS=/tmp/swarm MEMD_SWARM_N=10 go test -count=1 -v -run '^TestReliabilitySwarm$' ./reliability/
//	go run ./bench/swarmlog /tmp/swarm
//
// From the last change commit on any machine (about the last write plus the quiet time, or
// -since) it prints the successful pushes one after the other with the gap before each, and
// per machine the sync rounds, the pushes lost, the time spent fetching, planning,
// integrating, pushing and pausing between rounds, and when its HEAD last moved. Last, over
// the whole run, the writer lock's holds by what they did (a fast-forward, a merge, other:
// commits' reads and the rest), with their count, total, mean and 90th percentile.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

type event struct {
	machine string
	at      time.Time
	msg     string
	kv      map[string]string
}

var kvRE = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

func main() {
	since := flag.String("since", "", "start instant (RFC 3339); default: the last change commit")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: swarmlog [-since RFC3339] DIR (the MEMD_SWARM_LOGS directory)")
		os.Exit(2)
	}
	files, _ := filepath.Glob(filepath.Join(flag.Arg(0), "machine-*.log"))
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "swarmlog: no machine-*.log in %s\n", flag.Arg(0))
		os.Exit(1)
	}
	var evs []event
	for _, f := range files {
		e, err := read(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "swarmlog: %v\n", err)
			os.Exit(1)
		}
		evs = append(evs, e...)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	var t0 time.Time
	if *since != "" {
		t, err := time.Parse(time.RFC3339Nano, *since)
		if err != nil {
			fmt.Fprintf(os.Stderr, "swarmlog: -since %q: %v\n", *since, err)
			os.Exit(2)
		}
		t0 = t
	} else {
		for _, e := range evs {
			if e.msg == "committed" && e.kv["kind"] == "change" {
				t0 = e.at
			}
		}
	}
	fmt.Printf("from %s (the last change commit unless -since)\n\nsuccessful pushes:\n", t0.Format("15:04:05.000"))
	prev := t0
	type stats struct {
		rounds, lost                         int
		fetch, plan, integrate, push, paused time.Duration
		lastMove                             time.Time
	}
	per := map[string]*stats{}
	for _, e := range evs {
		if e.at.Before(t0) {
			continue
		}
		s := per[e.machine]
		if s == nil {
			s = &stats{}
			per[e.machine] = s
		}
		switch e.msg {
		case "push":
			s.push += dur(e.kv["took"])
			if e.kv["ok"] == "true" {
				fmt.Printf("  +%6.2fs  %s  (gap %.2fs)\n", e.at.Sub(t0).Seconds(), e.machine, e.at.Sub(prev).Seconds())
				prev = e.at
				s.lastMove = e.at
			} else {
				s.lost++
			}
		case "sync round":
			s.rounds++
			s.fetch += dur(e.kv["fetch"])
			s.plan += dur(e.kv["plan"])
			s.integrate += dur(e.kv["integrate"])
		case "push rejected, fetching again":
			s.paused += dur(e.kv["pause"])
		case "fast-forwarded", "merged remote changes":
			s.lastMove = e.at
		}
	}
	var ms []string
	for m := range per {
		ms = append(ms, m)
	}
	sort.Strings(ms)
	fmt.Printf("\n%-10s %6s %5s %8s %8s %8s %8s %8s %10s\n", "machine", "rounds", "lost", "fetch", "plan", "integr", "push", "paused", "head moved")
	for _, m := range ms {
		s := per[m]
		last := "-"
		if !s.lastMove.IsZero() {
			last = fmt.Sprintf("+%.2fs", s.lastMove.Sub(t0).Seconds())
		}
		fmt.Printf("%-10s %6d %5d %7.2fs %7.2fs %7.2fs %7.2fs %7.2fs %10s\n", m, s.rounds, s.lost,
			s.fetch.Seconds(), s.plan.Seconds(), s.integrate.Seconds(), s.push.Seconds(), s.paused.Seconds(), last)
	}
	lockHolds(evs)
}

// lockHolds prints the writer lock's holds ("writer lock released" held=) of the whole run
// by what each did: the last fast-forward or merge logged on its machine since the
// previous release, else other.
func lockHolds(evs []event) {
	kindOf := map[string]string{}
	holds := map[string][]time.Duration{}
	var all time.Duration
	for _, e := range evs {
		switch e.msg {
		case "fast-forwarded":
			kindOf[e.machine] = "fast-forward"
		case "merged remote changes":
			kindOf[e.machine] = "merge"
		case "writer lock released":
			k := kindOf[e.machine]
			if k == "" {
				k = "other"
			}
			d := dur(e.kv["held"])
			holds[k] = append(holds[k], d)
			all += d
			kindOf[e.machine] = ""
		}
	}
	fmt.Printf("\nwriter lock holds, whole run (all machines: %.2fs)\n%-13s %6s %8s %8s %8s %6s\n", all.Seconds(), "kind", "holds", "total", "mean", "p90", "share")
	for _, k := range []string{"fast-forward", "merge", "other"} {
		h := holds[k]
		if len(h) == 0 {
			continue
		}
		sort.Slice(h, func(i, j int) bool { return h[i] < h[j] })
		var sum time.Duration
		for _, d := range h {
			sum += d
		}
		fmt.Printf("%-13s %6d %7.2fs %6.2fms %6.2fms %5.1f%%\n", k, len(h), sum.Seconds(),
			ms(sum/time.Duration(len(h))), ms(h[len(h)*9/10]), 100*sum.Seconds()/all.Seconds())
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// read parses one daemon's log (slog's text format: time=... level=... msg=... key=value).
func read(path string) ([]event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	machine := strings.TrimSuffix(filepath.Base(path), ".log")
	var evs []event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		kv := map[string]string{}
		for _, m := range kvRE.FindAllStringSubmatch(sc.Text(), -1) {
			if _, dup := kv[m[1]]; !dup {
				kv[m[1]] = strings.Trim(m[2], `"`)
			}
		}
		at, err := time.Parse(time.RFC3339Nano, kv["time"])
		if err != nil {
			continue // not a log line (a panic's trace, a child's stderr)
		}
		evs = append(evs, event{machine: machine, at: at, msg: kv["msg"], kv: kv})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return evs, nil
}

// dur reads a Go duration as slog prints it; what does not parse counts as 0.
func dur(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}
