package sleep

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/memd-dev/memd"
)

// move is one planned archive move.
type move struct {
	from, to, reason string
}

// ArchiveReason says why a memory file at p is archived at now, or "" when it stays.
// Arcs and people are never archived; episodic memories go by year, done tasks by age,
// and any other file only when its writer set memhtml-status archived.
func ArchiveReason(p string, m *memd.Memory, now time.Time, keepYears int, doneAfter time.Duration) string {
	if m == nil || memd.IsArchived(p) || m.Type == "arc" || strings.HasPrefix(p, memd.PeopleDir+"/") {
		return ""
	}
	if m.Status == "archived" {
		return "status archived"
	}
	switch m.Type {
	case "episodic":
		if y := m.Year(p); y != 0 && y < now.Year()-keepYears {
			return fmt.Sprintf("episode of %d, older than %d", y, now.Year()-keepYears)
		}
	case "task":
		if m.TaskStatus == "done" && !m.UpdatedAt.IsZero() && now.Sub(m.UpdatedAt) > doneAfter {
			return "task done " + m.Updated
		}
	}
	return ""
}

// archiveYear is the year partition a file is archived under.
func archiveYear(p string, m *memd.Memory) int {
	if y := m.Year(p); y != 0 {
		return y
	}
	if !m.UpdatedAt.IsZero() {
		return m.UpdatedAt.UTC().Year()
	}
	return 0
}

func planArchive(s *snapshot, env *planEnv) (*plan, error) {
	p := newPlan()
	var moves []move
	for _, mp := range s.memPaths() {
		m := s.mems[mp]
		why := ArchiveReason(mp, m, env.now, env.cfg.Archive.KeepYears, env.cfg.Archive.DoneTasksAfter.D())
		if why == "" {
			continue
		}
		y := archiveYear(mp, m)
		if y == 0 {
			p.item("skip", mp, "", "no year known (no date prefix, <time> or memhtml-created)")
			p.counts["skipped"]++
			continue
		}
		moves = append(moves, move{from: mp, to: memd.ArchivePath(mp, y), reason: why})
	}
	if err := planMoves(s, env, p, moves, "archived"); err != nil {
		return nil, err
	}
	return p, nil
}

// planMoves adds the moves (pure renames) and, in the same plan, the rewrites of what points
// at the old paths from files that stay: <link>/<a> hrefs in memory files (arc lists
// included) and index-kind MEMORY.md bullets. A moved file's own bytes are not touched.
func planMoves(s *snapshot, env *planEnv, p *plan, moves []move, countKey string) error {
	if len(moves) == 0 {
		return nil
	}
	moved := map[string]string{}
	for _, mv := range moves {
		if s.files[mv.to] {
			p.item("skip", mv.from, mv.to, "destination exists")
			p.counts["skipped"]++
			continue
		}
		if _, dup := moved[mv.from]; dup {
			continue
		}
		moved[mv.from] = mv.to
		p.move(mv.from, mv.to)
		p.item("move", mv.from, mv.to, mv.reason)
		p.counts[countKey]++
	}
	if len(moved) == 0 {
		return nil
	}
	if err := planLinkRewrites(s, p, moved, func(string) bool { return true }); err != nil {
		return err
	}
	return planIndexRepoints(s, p, moved)
}

// planLinkRewrites rewrites hrefs to the old paths in every memory file that stays and
// passes filter. Only files whose parsed links name a moved path are read.
func planLinkRewrites(s *snapshot, p *plan, moved map[string]string, filter func(string) bool) error {
	links := 0
	for _, fp := range s.memPaths() {
		if _, leaving := moved[fp]; leaving || !filter(fp) {
			continue
		}
		m := s.mems[fp]
		var pairs [][2]string
		seen := map[string]bool{}
		for _, l := range m.Links {
			lp, err := memd.HrefToPath(l.Href)
			if err != nil || seen[lp] {
				continue
			}
			if to, ok := moved[lp]; ok {
				seen[lp] = true
				pairs = append(pairs, [2]string{lp, to})
			}
		}
		if len(pairs) == 0 {
			continue
		}
		old, exists, err := s.read(fp)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		data := old
		for _, pr := range pairs {
			data = rewriteHrefs(data, pr[0], pr[1])
		}
		if bytes.Equal(data, old) {
			p.item("report", fp, "", "links to moved files in a form sleep does not rewrite")
			continue
		}
		p.write(fp, data, old, true)
		for _, pr := range pairs {
			p.item("rewrite-link", fp, pr[1], "was "+pr[0])
			links++
		}
	}
	if links > 0 {
		p.counts["links"] += links
	}
	return nil
}

// rewriteHrefs replaces href="/from…" by href="/to…" (quoted with " or ', followed by the
// closing quote, a fragment or a query). Everything else stays byte-identical.
func rewriteHrefs(data []byte, from, to string) []byte {
	hf, ht := memd.PathToHref(from), memd.PathToHref(to)
	if !bytes.Contains(data, []byte(hf)) {
		return data
	}
	for _, q := range []string{`"`, `'`} {
		for _, end := range []string{q, "#", "?"} {
			old := []byte("href=" + q + hf + end)
			if bytes.Contains(data, old) {
				data = bytes.ReplaceAll(data, old, []byte("href="+q+ht+end))
			}
		}
	}
	return data
}
