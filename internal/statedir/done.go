package statedir

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// What a one-shot command did, for the running daemon's document (docs/ARCHITECTURE.md §11: a one-shot
// `memd sleep` or `memd sync` while `memd run` is up appears in the daemon's last sleep,
// events and commits per hour within a second). Each report is its own file, written
// atomically then kicked: the daemon reads and removes whole files, so a report is never
// read half written and two one-shots never interleave (an append file would need a lock).
const (
	donePrefix = "done-"
	doneSuffix = ".json"
	// maxReports bounds what waits for a daemon that is not running: the oldest go first.
	maxReports = 100
)

// Report is one one-shot command's work.
type Report struct {
	At      time.Time   `json:"at"`
	Command string      `json:"command"`          // "sleep", "sync"
	Commits int         `json:"commits"`          // commits it made (change, merge, sleep)
	Sleep   *SleepDone  `json:"sleep,omitempty"`  // a sleep run's counts
	Commit  *CommitDone `json:"commit,omitempty"` // its change commit's counts
	Pushed  bool        `json:"pushed,omitempty"` // a sync that pushed
	Merged  bool        `json:"merged,omitempty"` // a sync that merged or fast-forwarded
	// Conflicts are the conflict copies its merge kept (the daemon's events name each).
	Conflicts []string `json:"conflicts,omitempty"`
}

// SleepDone is a sleep run's counts, and the phases that failed ("phase: error").
type SleepDone struct {
	Counts map[string]int `json:"counts"`
	Failed []string       `json:"failed,omitempty"`
}

// CommitDone is a change commit's counts.
type CommitDone struct {
	Added, Modified, Deleted int
}

// WriteReport records r for the running daemon and kicks it.
func (d *Dir) WriteReport(r Report) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%s%020d-%d%s", donePrefix, r.At.UnixNano(), os.Getpid(), doneSuffix)
	if err := d.WriteFile(name, append(b, '\n'), 0o600); err != nil {
		return err
	}
	d.trimReports()
	return d.Kick(r.At)
}

// TakeReports returns the reports waiting, oldest first, and removes them. A file that is
// not a report is named in the error and removed (it would be read again at every kick).
func (d *Dir) TakeReports() ([]Report, error) {
	names := d.reportNames()
	var out []Report
	var bad []string
	for _, n := range names {
		b, err := d.ReadFile(n)
		_ = d.Remove(n)
		if err != nil {
			continue // gone meanwhile
		}
		var r Report
		if err := json.Unmarshal(b, &r); err != nil {
			bad = append(bad, d.Rel(n))
			continue
		}
		out = append(out, r)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("unreadable one-shot reports dropped: %s", strings.Join(bad, ", "))
	}
	return out, nil
}

// reportNames are the report files, oldest first (the names sort by time).
func (d *Dir) reportNames() []string {
	ents, err := os.ReadDir(d.abs)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, donePrefix) && strings.HasSuffix(n, doneSuffix) && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// trimReports drops the oldest reports past maxReports (no daemon took them).
func (d *Dir) trimReports() {
	names := d.reportNames()
	for len(names) > maxReports {
		_ = d.Remove(names[0])
		names = names[1:]
	}
}
