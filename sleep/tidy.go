package sleep

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
)

// planIndexRepoints repoints index-kind MEMORY.md bullets whose path moved.
func planIndexRepoints(s *snapshot, p *plan, moved map[string]string) error {
	for _, md := range s.filesNamed(memd.MemoryMDName) {
		if memd.IsArchived(md) {
			continue
		}
		data, exists, err := s.read(md)
		if err != nil {
			return err
		}
		if !exists || memorymd.Detect(data) != memorymd.KindIndex {
			continue
		}
		if out, n := repointIndex(data, func(bp string) (string, bool) {
			to, ok := moved[bp]
			return to, ok
		}); n > 0 {
			p.write(md, out, data, true)
			p.counts["bullets"] += n
			p.item("repoint-bullets", md, "", fmt.Sprintf("%d bullets to moved files", n))
		}
	}
	return nil
}

// repointIndex repoints every bullet whose (normalised) path target maps to a new path.
// Each line is repointed through a one-line view sharing it, so repointing k paths in an
// index of n bullets costs O(n), not O(n*k).
func repointIndex(data []byte, target func(string) (string, bool)) ([]byte, int) {
	idx := memorymd.ParseIndex(data)
	n := 0
	for i := range idx.Lines {
		ln := idx.Lines[i]
		if ln.Bullet == nil {
			continue
		}
		if to, ok := target(memd.NormalizePath(ln.Bullet.Path)); ok {
			n += (&memorymd.IndexMD{Lines: idx.Lines[i : i+1]}).Repoint(ln.Bullet.Path, to)
		}
	}
	if n == 0 {
		return data, 0
	}
	return idx.Bytes(), n
}

// matchGlob matches a '/'-separated path against a pattern whose segments use path.Match
// syntax, where a "**" segment matches any number of segments (none included).
func matchGlob(pattern, name string) bool {
	return matchSegs(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(segs); i++ {
				if matchSegs(pat[1:], segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], segs[0]); err != nil || !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// planTidy puts project-memory MEMORY.md files into the template (keeping the old file as
// MEMORY.pre-migration.md), repoints index bullets and memory links (archived files
// included) that point at a path now living in the archive, and reports MEMORY.md caps
// (measured, never enforced by cutting). Ledger records are never touched.
func planTidy(s *snapshot, env *planEnv) (*plan, error) {
	p := newPlan()
	arch := s.archivedAt()
	movedAway := func(q string) (string, bool) {
		if s.files[q] {
			return "", false
		}
		to, ok := arch[q]
		return to, ok
	}
	for _, md := range s.filesNamed(memd.MemoryMDName) {
		if memd.IsArchived(md) {
			continue
		}
		data, exists, err := s.read(md)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue
		}
		tidyMD(s, env, p, md, data, movedAway)
	}
	// Links to files that now live in the archive, from every memory file.
	for _, fp := range s.memPaths() {
		m := s.mems[fp]
		pairs := map[string]string{}
		for _, ref := range m.Refs {
			lp, err := memd.HrefToPath(ref)
			if err != nil {
				continue
			}
			if to, ok := movedAway(lp); ok {
				pairs[lp] = to
			}
		}
		if len(pairs) == 0 {
			continue
		}
		old, exists, err := s.read(fp)
		if err != nil {
			return nil, err
		}
		if !exists {
			continue
		}
		data := rewriteHrefs(old, pairs)
		if bytes.Equal(data, old) {
			continue
		}
		p.write(fp, data, old, true)
		for _, from := range slices.Sorted(maps.Keys(pairs)) {
			p.item("rewrite-link", fp, pairs[from], "was "+from)
			p.counts["links"]++
		}
	}
	return p, nil
}

// tidyMD plans one MEMORY.md (not archived) with the bytes data; movedAway says where an
// index bullet's target went.
func tidyMD(s *snapshot, env *planEnv, p *plan, md string, data []byte, movedAway func(string) (string, bool)) {
	switch memorymd.Detect(data) {
	case memorymd.KindIndex:
		if out, n := repointIndex(data, movedAway); n > 0 {
			p.write(md, out, data, true)
			p.counts["bullets"] += n
			p.item("repoint-bullets", md, "", fmt.Sprintf("%d bullets to archived files", n))
		}
	case memorymd.KindProject:
		if matchesAny(env.cfg.Tidy.MemoryMD, md) {
			planProjectMD(s, p, md, data)
		}
	}
}

func matchesAny(globs []string, p string) bool {
	for _, g := range globs {
		if matchGlob(g, p) {
			return true
		}
	}
	return false
}

// planProjectMD repairs one project-kind MEMORY.md and reports its caps.
func planProjectMD(s *snapshot, p *plan, md string, data []byte) {
	rep := memorymd.InspectProject(data)
	if rep.OverCap {
		p.counts["over_cap"]++
		p.item("report", md, "", fmt.Sprintf("%d lines, %d characters: over the cap (%d lines / %d characters); not cut",
			rep.Lines, rep.Chars, memorymd.ProjectMaxLines, memorymd.ProjectMaxChars))
	} else if rep.OverSoftCap {
		p.counts["over_soft_cap"]++
		p.item("report", md, "", fmt.Sprintf("%d lines, %d characters: over the soft cap (%d lines / %d characters)",
			rep.Lines, rep.Chars, memorymd.ProjectSoftLines, memorymd.ProjectSoftChars))
	}
	if n := len(rep.LongBullets); n > 0 {
		p.counts["long_bullets"] += n
		p.item("report", md, "", fmt.Sprintf("%d bullets over %d characters (lines %v)", n, memorymd.ProjectMaxBulletChars, rep.LongBullets))
	}
	fixed := memorymd.RepairProject(data, memorymd.ProjectNameOf(md))
	if bytes.Equal(fixed, data) {
		return
	}
	backup := path.Join(path.Dir(md), memorymd.PreMigrationName)
	old, found, err := s.read(backup)
	if err != nil {
		p.item("skip", md, "", "cannot read "+backup+": "+err.Error())
		return
	}
	if !found || !bytes.Equal(old, data) {
		p.write(backup, data, old, found)
	}
	p.write(md, fixed, data, true)
	p.counts["repaired"]++
	p.item("repair", md, backup, "put into the four-section template")
}
