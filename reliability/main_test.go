// Package reliability drives the real memd binary as a process against real git repos and a
// real remote and injects faults: SIGKILL at random (seeded) moments, concurrent writer
// processes, a failing remote, hostile trees and configs, exposure checks and a soak.
//
// Settings:
//
//	go test ./reliability/                       short: a few iterations (part of make test)
//	MEMD_RELIABILITY=long go test ./reliability/ long: 200 crash iterations, 10k writes
//	MEMD_RELIABILITY_ITER=N                      crash iterations per scenario (overrides both)
//	MEMD_SEED=N                                  replay a run's random choices (its seed is printed)
//	MEMD_SOAK=10m                                TestSoak runs for that long (else skipped)
//
// Every test prints its rows into one table (scenario, iterations, writes made, writes found
// committed and pushed, corruptions, time), printed after the run.
package reliability

import (
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// memdBin is built once, without -race: the daemon is what is under test and must run at
// its real speed; the race detector runs on the test process and its helper processes.
var memdBin string

// seed is the run's seed; every scenario derives its own stream from it and its name, so a
// scenario replays the same choices whatever else runs.
var seed uint64

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("MEMD_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "MEMD_SEED=%q: not an unsigned integer\n", v)
			os.Exit(2)
		}
		seed = s
	}
	fmt.Printf("reliability: setting %s, seed %d (replay with MEMD_SEED=%d)\n", settingName(), seed, seed)
	bin, remove, err := testutil.BuildMemd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	memdBin = bin
	code := m.Run()
	printTable(os.Stdout)
	fmt.Printf("reliability: seed %d\n", seed)
	remove()
	os.Exit(code)
}

func isLong() bool { return os.Getenv("MEMD_RELIABILITY") == "long" }

func settingName() string {
	s := "short"
	if isLong() {
		s = "long"
	}
	if v := os.Getenv("MEMD_RELIABILITY_ITER"); v != "" {
		s += " (MEMD_RELIABILITY_ITER=" + v + ")"
	}
	return s
}

// iterations is the crash iteration count of a scenario: MEMD_RELIABILITY_ITER, else the
// long or the short count.
func iterations(t testing.TB, short, long int) int {
	if v := os.Getenv("MEMD_RELIABILITY_ITER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("MEMD_RELIABILITY_ITER=%q: not a positive integer", v)
		}
		return n
	}
	if isLong() {
		return long
	}
	return short
}

// scenarioRand is the scenario's own seeded stream.
func scenarioRand(t testing.TB, name string) *rand.Rand {
	h := fnv.New64a()
	io.WriteString(h, name)
	t.Logf("%s: seed %d (MEMD_SEED=%d replays it)", name, seed, seed)
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// row is one line of the report table.
type row struct {
	Scenario    string
	Iterations  int
	Writes      int // writes made (files written, with their final content known)
	Found       int // of those, found with their final content in HEAD and on the remote
	Corruptions int // fsck errors, conflict markers, half-written versions, lost writes
	Time        time.Duration
	Note        string
}

var table = struct {
	sync.Mutex
	rows []row
}{}

func record(t testing.TB, r row) {
	table.Lock()
	table.rows = append(table.rows, r)
	table.Unlock()
	t.Logf("%-34s iter=%d writes=%d found=%d corruptions=%d time=%s %s",
		r.Scenario, r.Iterations, r.Writes, r.Found, r.Corruptions, r.Time.Round(100*time.Millisecond), r.Note)
}

// printTable writes the table as Markdown (docs/RELIABILITY.md takes it as it is).
func printTable(w io.Writer) {
	table.Lock()
	defer table.Unlock()
	if len(table.rows) == 0 {
		return
	}
	rows := append([]row(nil), table.rows...)
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Scenario < rows[j].Scenario })
	fmt.Fprintf(w, "\n| scenario | iterations | writes made | committed and pushed | corruptions | time | notes |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s |\n", r.Scenario, r.Iterations, r.Writes, r.Found,
			r.Corruptions, r.Time.Round(100*time.Millisecond), strings.ReplaceAll(r.Note, "|", "/"))
	}
	fmt.Fprintln(w)
}
