package sleep

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/format/memfile"
)

// planEnv is what every planner gets besides the snapshot.
type planEnv struct {
	ctx      context.Context
	cfg      memd.Config
	now      time.Time
	log      *slog.Logger
	progress io.Writer
	dryRun   bool
}

// DrainedFile is the name of the per-year file drained ledger records are appended to.
const DrainedFile = "memory.drained.jsonl"

// ledgerPath is the configured ledger, repo-relative.
func ledgerPath(cfg memd.Config) string {
	if cfg.Expire.Ledger == "" {
		return memd.DefaultLedgerFile
	}
	return cfg.Expire.Ledger
}

// planExpire drains ledger notes and archives memory files whose valid-until has passed by
// more than the soft grace.
func planExpire(s *snapshot, env *planEnv) (*plan, error) {
	p := newPlan()
	ledgerPath := ledgerPath(env.cfg)
	grace := env.cfg.Expire.SoftGrace.D()
	raw, exists, err := s.read(ledgerPath)
	if err != nil {
		return nil, err
	}
	if exists {
		if err := planLedger(s, env, p, ledgerPath, raw, grace); err != nil {
			return nil, err
		}
	}

	// Memory files past their writer-given validity: archived like the archive phase does
	// (the writer's own date wins over the type rules there), arcs excepted.
	var moves []move
	for _, mp := range s.memPaths() {
		if mv, ok := expireFile(mp, s.mems[mp], env.now, grace); ok {
			moves = append(moves, mv)
		}
	}
	if err := planMoves(s, env, p, moves, CountArchived); err != nil {
		return nil, err
	}
	return p, nil
}

// expireFile is expire's rule for one memory file: the move when it is past its
// valid-until plus the grace.
func expireFile(mp string, m *memfile.Memory, now time.Time, grace time.Duration) (mv move, ok bool) {
	// Tasks and arcs are exempt, as memhtml's reprieve phase exempts them: a task ends by
	// being done, an arc is derived.
	if memd.IsArchived(mp) || m.Type == memd.TypeArc || m.Type == memd.TypeTask || m.ValidUntilAt.IsZero() {
		return move{}, false
	}
	if !now.After(m.ValidUntilAt.Add(grace)) {
		return move{}, false
	}
	// memhtml's archive rule: the year of the archiving run (ArchiveStamps).
	return move{from: mp, to: memd.ArchivePath(mp, now.UTC().Year()), reason: "valid-until " + m.ValidUntil + " passed"}, true
}

func planLedger(s *snapshot, env *planEnv, p *plan, ledgerPath string, raw []byte, grace time.Duration) error {
	led := ledger.Parse(raw)
	drained := map[int][][]byte{} // year -> lines to append
	keep := led.Lines[:0:0]
	drainedN := 0
	existing := map[int]map[string]bool{} // year -> ids already in that drained file
	for _, ln := range led.Lines {
		if ln.Err != nil {
			p.counts["unparseable"]++
		}
		v := ledger.JudgeNote(ln.Record, env.now, grace)
		if v.Bad != "" {
			p.counts["invalid"]++
			p.item("report", ledgerPath, "", "note "+ln.Record.ID+": "+v.Bad)
		}
		if v.Stale {
			p.counts["stale"]++
			if !v.Drain {
				p.item("stale", ledgerPath, "", "note "+ln.Record.ID+" soft-expired "+ln.Record.Lifecycle.ExpiresAt)
			}
		}
		if !v.Drain {
			keep = append(keep, ln)
			continue
		}
		ids, ok := existing[v.Year]
		if !ok {
			ids = map[string]bool{}
			dp := drainedPath(v.Year)
			if b, found, err := s.read(dp); err != nil {
				return err
			} else if found {
				for _, r := range ledger.Parse(b).Records() {
					ids[r.ID] = true
				}
			}
			existing[v.Year] = ids
		}
		line, err := drainedLine(ln.Record, v.Reason, env.now)
		if err != nil {
			return err
		}
		// A run killed between the two writes could leave the record in both files; the
		// drained copy is then the one kept (nothing lost, nothing doubled).
		if id := ln.Record.ID; id == "" || !ids[id] {
			drained[v.Year] = append(drained[v.Year], line)
			ids[id] = true
		}
		drainedN++
		p.counts["drained"]++
		p.counts["drained_"+string(ln.Record.Lifecycle.Mode)]++
		p.item("drain", ledgerPath, drainedPath(v.Year), "note "+ln.Record.ID+": "+string(v.Reason))
	}
	if drainedN == 0 {
		return nil
	}
	// Appended first, in the same commit as the ledger rewrite.
	if err := appendDrained(s, p, drained); err != nil {
		return err
	}
	led.Lines = keep
	p.write(ledgerPath, led.Bytes(), raw, true)
	return nil
}

// drainedLine is the record as its drained file keeps it: stamped with when and why.
func drainedLine(r *ledger.Record, reason memd.LifecycleMode, now time.Time) ([]byte, error) {
	rec := r.Clone()
	if err := rec.Set("drainedAt", now.UTC().Format(time.RFC3339)); err != nil {
		return nil, fmt.Errorf("drain %s: %w", rec.ID, err)
	}
	if err := rec.Set("drainReason", string(reason)); err != nil {
		return nil, fmt.Errorf("drain %s: %w", rec.ID, err)
	}
	line, err := rec.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("drain %s: %w", rec.ID, err)
	}
	return line, nil
}

// appendDrained plans the appends of the drained lines to each year's drained file.
func appendDrained(s *snapshot, p *plan, drained map[int][][]byte) error {
	years := make([]int, 0, len(drained))
	for y := range drained {
		years = append(years, y)
	}
	sort.Ints(years)
	for _, y := range years {
		dp := drainedPath(y)
		old, found, err := s.read(dp)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		buf.Write(old)
		if len(old) > 0 && old[len(old)-1] != '\n' {
			buf.WriteByte('\n')
		}
		for _, line := range drained[y] {
			buf.Write(line)
			buf.WriteByte('\n')
		}
		p.write(dp, buf.Bytes(), old, found)
	}
	return nil
}

func drainedPath(year int) string {
	return path.Join(string(memd.BucketArchive), fmt.Sprintf("%04d", year), DrainedFile)
}
