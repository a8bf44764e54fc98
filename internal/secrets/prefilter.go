package secrets

import "strings"

// prefilter finds which of the rules' keywords occur in a lower-cased text in one pass:
// each keyword is indexed by its first two bytes, and only where a text's byte pair starts
// some keyword are those keywords compared (~250 strings.Contains calls over a 10 KiB
// memory cost more than the regexes they save).
type prefilter struct {
	byPair map[uint16][]string
	short  []string // keywords under two bytes: looked for with strings.Contains
}

func newPrefilter(keywords []string) *prefilter {
	p := &prefilter{byPair: map[uint16][]string{}}
	for _, k := range keywords {
		if len(k) < 2 {
			p.short = append(p.short, k)
			continue
		}
		key := uint16(k[0])<<8 | uint16(k[1])
		p.byPair[key] = append(p.byPair[key], k)
	}
	return p
}

// present is the keywords lower holds.
func (p *prefilter) present(lower string) map[string]bool {
	out := map[string]bool{}
	for _, k := range p.short {
		if strings.Contains(lower, k) {
			out[k] = true
		}
	}
	for i := 0; i+1 < len(lower); i++ {
		ks, ok := p.byPair[uint16(lower[i])<<8|uint16(lower[i+1])]
		if !ok {
			continue
		}
		for _, k := range ks {
			if !out[k] && strings.HasPrefix(lower[i:], k) {
				out[k] = true
			}
		}
	}
	return out
}
