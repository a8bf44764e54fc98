package sleep

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd"
)

type arcKey struct {
	entity string
	year   int
}

// groupArcs groups the active episodic memories outside archive/ by key (each entity, or
// the first tag) and the year of their event date (memd.Memory.EventDate).
func groupArcs(s *snapshot, key string) map[arcKey][]memd.ArcEpisode {
	groups := map[arcKey][]memd.ArcEpisode{}
	var keys []arcKey
	for _, mp := range s.memPaths() {
		m := s.mems[mp]
		var date time.Time
		keys, date = arcKeysOf(mp, m, key, keys[:0])
		for _, ak := range keys {
			groups[ak] = append(groups[ak], memd.ArcEpisode{Path: mp, Date: date, Title: m.Title, Gist: m.Gist})
		}
	}
	return groups
}

// arcKeysOf appends to out the groups the memory file at mp is a member of (each key once)
// and returns them with its event date: none unless it is an active episode
// (memhtml-type episodic, whatever its name) outside archive/ with a known date.
func arcKeysOf(mp string, m *memd.Memory, key string, out []arcKey) ([]arcKey, time.Time) {
	if !m.IsEpisode() || m.Status == memd.StatusArchived || memd.IsArchived(mp) {
		return out, time.Time{}
	}
	date, ok := m.EventDate(mp)
	if !ok {
		return out, time.Time{}
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
		if k == "" || slices.Contains(out[first:], arcKey{k, date.Year()}) {
			continue
		}
		out = append(out, arcKey{k, date.Year()})
	}
	return out, date
}

// arcsMin is arcs.min_episodes, 3 when unset.
func arcsMin(cfg memd.Config) int {
	if cfg.Arcs.MinEpisodes < 1 {
		return 3
	}
	return cfg.Arcs.MinEpisodes
}

// planArcs writes an arc for every group of at least arcs.min_episodes whose member set
// differs from the arc on disk. Arcs whose group fell below the threshold (members archived
// or deleted) are left as they are: they are files people read, and sleep never deletes.
func planArcs(s *snapshot, env *planEnv) (*plan, error) {
	p := newPlan()
	min := arcsMin(env.cfg)
	groups := groupArcs(s, env.cfg.Arcs.Key)
	keys := make([]arcKey, 0, len(groups))
	for k, eps := range groups {
		if len(eps) >= min {
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
	for i, k := range keys {
		if env.ctx != nil && env.ctx.Err() != nil {
			return nil, env.ctx.Err()
		}
		eps := groups[k]
		sort.Slice(eps, func(i, j int) bool {
			if !eps[i].Date.Equal(eps[j].Date) {
				return eps[i].Date.Before(eps[j].Date)
			}
			return eps[i].Path < eps[j].Path
		})
		ap := memd.ArcPath(k.entity, k.year)
		if other, taken := claimed[ap]; taken {
			// Two entity values with one slug: the first (sorted) keeps the file.
			p.item("skip", ap, "", "entity "+k.entity+" has the same arc file as "+other)
			p.counts["skipped"]++
			continue
		}
		claimed[ap] = k.entity
		// The member hash meta decides: an unchanged group costs no render, no summarizer
		// call and no commit.
		hash := memd.ArcMemberHash(eps)
		cur, exists := s.mems[ap]
		if exists && cur.Meta(memd.MetaMembers) == hash {
			continue
		}
		if exists && cur.Type != memd.TypeArc {
			p.item("skip", ap, "", "a non-arc file sits at the arc path")
			p.counts["skipped"]++
			continue
		}
		a := memd.Arc{Entity: k.entity, Year: k.year, Episodes: eps}
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
			return nil, err
		}
		data := memd.RenderArc(a)
		if found && string(old) == string(data) {
			continue
		}
		p.write(ap, data, old, found)
		if found {
			p.counts["updated"]++
			p.item("write-arc", ap, "", "members changed")
		} else {
			p.counts["created"]++
			p.item("write-arc", ap, "", "new arc")
		}
		progress(env.progress, "arcs (plan)", i+1, len(keys))
	}
	progressDone(env.progress, len(keys))
	return p, nil
}
