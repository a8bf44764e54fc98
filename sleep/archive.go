package sleep

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
)

// move is one planned archive move.
type move struct {
	from, to, reason string
}

// ArchiveReason says why a memory file at p is archived at now, or "" when it stays.
// Arcs and people are never archived; episodic memories go by year, done tasks by age,
// and any other file only when its writer set memhtml-status archived.
func ArchiveReason(p string, m *memfile.Memory, now time.Time, keepYears int, doneAfter time.Duration) string {
	if m == nil || memd.IsArchived(p) || m.Type == memd.TypeArc || strings.HasPrefix(p, memd.PeopleDir+"/") {
		return ""
	}
	if m.Status == memd.StatusArchived {
		return "status archived"
	}
	switch m.Type {
	case "episodic":
		if y := m.Year(p); y != 0 && y < now.Year()-keepYears {
			return fmt.Sprintf("episode of %d, older than %d", y, now.Year()-keepYears)
		}
	case memd.TypeTask:
		if m.TaskStatus == memd.TaskDone && !m.UpdatedAt.IsZero() && now.Sub(m.UpdatedAt) > doneAfter {
			return "task done " + m.Updated
		}
	}
	return ""
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
		// memhtml's archive files by the year of the archiving run, not the memory's.
		moves = append(moves, move{from: mp, to: memd.ArchivePath(mp, env.now.UTC().Year()), reason: why})
	}
	if err := planMoves(s, env, p, moves, CountArchived); err != nil {
		return nil, err
	}
	return p, nil
}

// planMoves adds the moves and, in the same plan, the rewrites of what points at the old
// paths from files that stay: <link>/<a> hrefs in memory files (arc lists included) and
// index-kind MEMORY.md bullets. A moved memory gets memhtml's archive stamps (memfile.ArchiveStamps:
// head edits only, written at the old path just before the move, so the journal undoes both);
// its links and article are not touched.
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
		if err := planStamps(s, env, p, mv.from); err != nil {
			return err
		}
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

// planStamps stamps the memory at mp as memhtml's archive does before it moves.
func planStamps(s *snapshot, env *planEnv, p *plan, mp string) error {
	old, exists, err := s.read(mp)
	if err != nil || !exists {
		return err
	}
	if data := memfile.ArchiveStamps(old, env.now); string(data) != string(old) {
		p.write(mp, data, old, true)
	}
	return nil
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
		pairs := map[string]string{}
		for _, ref := range m.Refs {
			lp, err := memd.HrefToPath(ref)
			if err != nil {
				continue
			}
			if to, ok := moved[lp]; ok {
				pairs[lp] = to
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
		data := rewriteHrefs(old, pairs)
		if bytes.Equal(data, old) {
			p.item("report", fp, "", "links to moved files in a form sleep does not rewrite")
			continue
		}
		p.write(fp, data, old, true)
		for _, from := range slices.Sorted(maps.Keys(pairs)) {
			p.item("rewrite-link", fp, pairs[from], "was "+from)
			links++
		}
	}
	if links > 0 {
		p.counts["links"] += links
	}
	return nil
}

// rewriteHrefs replaces, in one pass, every href="/from…" by href="/to…" for the pairs in
// repl (old path -> new path): quoted with " or ', the value either the whole href or
// followed by a fragment or query. A content="/from" (memhtml-superseded-by names its
// successor by href) is rewritten the same way. Everything else stays byte-identical. One
// pass matters: an arc lists hundreds of members that may all move in one night.
func rewriteHrefs(data []byte, repl map[string]string) []byte {
	if len(repl) == 0 {
		return data
	}
	hrefs := make(map[string]string, len(repl))
	for from, to := range repl {
		hrefs[memd.PathToHref(from)] = memd.PathToHref(to)
	}
	var out []byte
	last := 0
	for i := 0; ; {
		k, name := bytes.Index(data[i:], []byte("href=")), "href="
		if c := bytes.Index(data[i:], []byte("content=")); c >= 0 && (k < 0 || c < k) {
			k, name = c, "content="
		}
		if k < 0 {
			break
		}
		at := i + k
		v := at + len(name)
		i = v
		if at > 0 && !isHTMLSpace(data[at-1]) { // data-href=, xhref=: not an href attribute
			continue
		}
		if v >= len(data) || (data[v] != '"' && data[v] != '\'') {
			continue
		}
		q := data[v]
		end := bytes.IndexByte(data[v+1:], q)
		if end < 0 {
			break
		}
		val := data[v+1 : v+1+end]
		base := val
		if j := bytes.IndexAny(val, "#?"); j >= 0 {
			base = val[:j]
		}
		if to, ok := hrefs[string(base)]; ok {
			if out == nil {
				out = make([]byte, 0, len(data)+64)
			}
			out = append(out, data[last:v+1]...)
			out = append(out, to...)
			last = v + 1 + len(base)
		}
		i = v + 1 + end + 1
	}
	if out == nil {
		return data
	}
	return append(out, data[last:]...)
}

func isHTMLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
