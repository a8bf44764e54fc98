package secrets

import (
	"regexp"
	"sync"
)

// lazyRE is a regex compiled on its first use. gitleaks' default rules are ~220 regexes
// and compiling them all took ~16 ms of every one-shot command that commits (`memd restore`
// with one file); a file is matched by the handful its keywords select. The default rules
// are embedded and compiled whole by a test (TestDefaultRulesCompile); a user's config is
// compiled at load (newRE with eager), so a bad pattern still stops startup.
type lazyRE struct {
	src  string
	once sync.Once
	re   *regexp.Regexp
}

// newRE is src as a lazyRE: compiled now when eager (the error returned), else on first use.
func newRE(src string, eager bool) (*lazyRE, error) {
	l := &lazyRE{src: src}
	if eager {
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, err
		}
		l.once.Do(func() { l.re = re })
	}
	return l, nil
}

// get is the compiled regex; an embedded pattern that does not compile (a test catches
// that first) matches nothing rather than panicking in the daemon.
func (l *lazyRE) get() *regexp.Regexp {
	l.once.Do(func() {
		re, err := regexp.Compile(l.src)
		if err != nil {
			re = regexp.MustCompile(`[^\x00-\x{10FFFF}]`)
		}
		l.re = re
	})
	return l.re
}

func (l *lazyRE) MatchString(s string) bool { return l.get().MatchString(s) }

func (l *lazyRE) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }

func (l *lazyRE) FindAllStringIndex(s string, n int) [][]int { return l.get().FindAllStringIndex(s, n) }
