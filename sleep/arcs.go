package sleep

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
)

type arcKey struct {
	entity string // memfile.NormalizeEntityRef of the entity (or tag): memhtml's sameness
	year   int
}

// arcGroup is one arc's members and the spellings its entity was written with.
type arcGroup struct {
	eps       []memfile.ArcEpisode
	spellings map[string]int
}

// name is the spelling the arc shows: the one most members use, ties to the
// lexicographically smaller (memhtml's entity resolution picks its canonical the same way).
func (g *arcGroup) name() string {
	best, n := "", -1
	for s, c := range g.spellings {
		if c > n || c == n && s < best {
			best, n = s, c
		}
	}
	return best
}

// groupArcs groups the active episodic memories outside archive/ by key (each entity, or
// the first tag), matched as memhtml matches entities (case-insensitively, after its
// normalisation), and the year of their event date (memfile.Memory.EventDate).
func groupArcs(s *snapshot, key string) map[arcKey]*arcGroup {
	groups := map[arcKey]*arcGroup{}
	var keys []arcKey
	var names []string
	for _, mp := range s.memPaths() {
		m := s.mems[mp]
		var date time.Time
		keys, names, date = arcKeysOf(mp, m, key, keys[:0], names[:0])
		for i, ak := range keys {
			g := groups[ak]
			if g == nil {
				g = &arcGroup{spellings: map[string]int{}}
				groups[ak] = g
			}
			g.eps = append(g.eps, memfile.ArcEpisode{Path: mp, Date: date, Title: m.Title, Gist: m.Gist})
			g.spellings[names[i]]++
		}
	}
	return groups
}

// arcKeysOf appends to out the groups the memory file at mp is a member of (each key once,
// with the spelling the file uses in names) and returns them with its event date: none
// unless it is an active episode (memhtml-type episodic, whatever its name) outside archive/
// with a known date that memhtml indexes (a file memhtml refuses, such as one whose <time>
// has a UTC offset, is in no arc: an arc lists only what memhtml can follow).
func arcKeysOf(mp string, m *memfile.Memory, key string, out []arcKey, names []string) ([]arcKey, []string, time.Time) {
	if !m.IsEpisode() || !m.Valid() || m.Status == memd.StatusArchived || memd.IsArchived(mp) {
		return out, names, time.Time{}
	}
	date, ok := m.EventDate(mp)
	if !ok {
		return out, names, time.Time{}
	}
	date = date.UTC()
	var keys []string
	if key == "tag" {
		if len(m.Tags) > 0 {
			keys = m.Tags[:1]
		}
	} else {
		keys = m.Entities
	}
	first := len(out)
	for _, k := range keys {
		k = strings.TrimSpace(k)
		ak := arcKey{memfile.NormalizeEntityRef(k), date.Year()}
		if ak.entity == "" || slices.Contains(out[first:], ak) {
			continue
		}
		out = append(out, ak)
		names = append(names, k)
	}
	return out, names, date
}

// arcsMin is arcs.min_episodes, 3 when unset.
func arcsMin(cfg memd.Config) int {
	if cfg.Arcs.MinEpisodes < 1 {
		return 3
	}
	return cfg.Arcs.MinEpisodes
}

// planArcs writes an arc for every group of at least arcs.min_episodes whose member set
// differs from the arc on disk, and gives each member the memhtml-part-of link to its arc
// (a head edit, in the same commit). Arcs whose group fell below the threshold (members
// archived or deleted) are left as they are: they are files people read, and sleep never
// deletes. An arc memd did not write (IsMemdArc) is never rewritten.
func planArcs(s *snapshot, env *planEnv) (*plan, error) {
	p := newPlan()
	min := arcsMin(env.cfg)
	groups := groupArcs(s, env.cfg.Arcs.Key)
	keys := make([]arcKey, 0, len(groups))
	for k, g := range groups {
		if len(g.eps) >= min {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].year != keys[j].year {
			return keys[i].year < keys[j].year
		}
		return keys[i].entity < keys[j].entity
	})
	claimed := map[string]string{}
	partOf := map[string][]string{} // member path → the arcs it belongs to
	for i, k := range keys {
		if env.ctx != nil && env.ctx.Err() != nil {
			return nil, env.ctx.Err()
		}
		g := groups[k]
		eps := g.eps
		sort.Slice(eps, func(i, j int) bool {
			if !eps[i].Date.Equal(eps[j].Date) {
				return eps[i].Date.Before(eps[j].Date)
			}
			return eps[i].Path < eps[j].Path
		})
		name := g.name()
		ap := memfile.ArcPath(name, k.year)
		if other, taken := claimed[ap]; taken {
			// Two entity values with one slug: the first (sorted) keeps the file.
			p.item("skip", ap, "", "entity "+name+" has the same arc file as "+other)
			p.counts["skipped"]++
			continue
		}
		claimed[ap] = name
		if cur, exists := s.mems[ap]; exists && !memfile.IsMemdArc(cur) {
			why := "a non-arc file sits at the arc path"
			if cur.Type == memd.TypeArc {
				why = "an arc memd did not write sits at the arc path (memd never rewrites it)"
			}
			p.item("skip", ap, "", why)
			p.counts["skipped"]++
			continue
		}
		for _, e := range eps {
			partOf[e.Path] = append(partOf[e.Path], ap)
		}
		if err := planArc(s, env, p, memfile.Arc{Entity: name, Year: k.year, Episodes: eps}, ap); err != nil {
			return nil, err
		}
		progress(env.progress, "arcs (plan)", i+1, len(keys))
	}
	progressDone(env.progress, len(keys))
	if err := planPartOf(s, p, partOf); err != nil {
		return nil, err
	}
	return p, nil
}

// planArc writes the arc a at ap unless the arc there already holds its members. A rewrite
// keeps what other writers added to the arc's head (memfile.ArcCarry).
func planArc(s *snapshot, env *planEnv, p *plan, a memfile.Arc, ap string) error {
	// The member hash meta decides: an unchanged group costs no render, no summarizer
	// call and no commit.
	hash := memfile.ArcMemberHash(a.Episodes)
	if cur, exists := s.mems[ap]; exists && cur.Meta(memfile.MetaMembers) == hash {
		return nil
	}
	if cmd := env.cfg.Arcs.Summarizer.Command; len(cmd) > 0 && !env.dryRun {
		sum, err := Summarize(env.ctx, cmd, env.cfg.Arcs.Summarizer.Timeout.D(), summarizerEnv(env.cfg), a, ap)
		if err != nil {
			env.log.Warn("arc summarizer failed; the arc keeps its deterministic summary", "arc", ap, "err", err)
			p.counts["summarizer_failed"]++
		} else {
			a.Summary = sum
			p.counts["summarized"]++
		}
	}
	old, found, err := s.read(ap)
	if err != nil {
		return err
	}
	if found {
		a.Carry = memfile.ArcCarry(old)
	}
	data := memfile.RenderArc(a)
	if found && string(old) == string(data) {
		return nil
	}
	p.write(ap, data, old, found)
	if found {
		p.counts["updated"]++
		p.item("write-arc", ap, "", "members changed")
	} else {
		p.counts["created"]++
		p.item("write-arc", ap, "", "new arc")
	}
	return nil
}

// planPartOf gives each member the <link rel="memhtml-part-of"> to each of its arcs that it
// lacks: the edge memhtml's own arcs use, so `memhtml neighbors` walks from an arc to its
// episodes and back. A head edit only (memfile.AddLink): the article and its content hash never
// change. memhtml also stamps memhtml-updated when it links; memd does not, so two machines
// linking the same member write the same bytes.
func planPartOf(s *snapshot, p *plan, partOf map[string][]string) error {
	linked := 0
	for _, mp := range slices.Sorted(maps.Keys(partOf)) {
		m := s.mems[mp]
		var missing []string
		for _, ap := range slices.Sorted(slices.Values(partOf[mp])) {
			if !hasPartOf(m, memd.PathToHref(ap)) {
				missing = append(missing, memd.PathToHref(ap))
			}
		}
		if len(missing) == 0 {
			continue
		}
		old, exists, err := s.read(mp)
		if err != nil {
			return err
		}
		if !exists {
			continue
		}
		data := old
		for _, href := range missing {
			data = memfile.AddLink(data, "part_of", href)
		}
		if string(data) == string(old) {
			p.item("report", mp, "", "no head to add the memhtml-part-of link to")
			continue
		}
		p.write(mp, data, old, true)
		for _, href := range missing {
			p.item("link-part-of", mp, href, "member of the arc")
			linked++
		}
	}
	if linked > 0 {
		p.counts["linked"] += linked
	}
	return nil
}

// hasPartOf reports whether m links to href with memhtml-part-of (either spelling).
func hasPartOf(m *memfile.Memory, href string) bool {
	for _, l := range m.Links {
		if memfile.RelOfToken(l.Rel) == "part_of" && l.Href == href {
			return true
		}
	}
	return false
}
