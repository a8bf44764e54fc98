// Package secrets finds credentials in what memd is about to commit, with gitleaks' detection
// rules (docs/ARCHITECTURE.md §11 "Secrets never leave the machine").
//
// The rules are gitleaks v8.30.1's default configuration, vendored as gitleaks.toml (with
// gitleaks' MIT license, LICENSE.gitleaks), and run by the matcher in match.go, which follows
// gitleaks' detect package rule by rule: keyword prefilter, regex, secret group, entropy,
// path rules, global and per-rule allowlists (regexes with their target, stopwords, paths,
// AND/OR), the generic-rule dedupe, inline `gitleaks:allow` and .gitleaksignore fingerprints.
// gitleaks' module itself is not linked: importing it added 55 package inits (~4-7 ms to
// every memd command's start-up), 7 MB of binary and ~1300 module-graph edges (a wasm
// runtime, archive readers, viper, cobra), for a detector memd uses one function of. The
// parity tests run the real gitleaks CLI on the same corpus.
//
// Nothing here runs at package init: Default parses the ~220 rules on first use and each
// rule's regex compiles when a file first needs it (lazyRE).
package secrets

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
)

//go:embed gitleaks.toml
var defaultTOML string

// ErrBadConfig: a gitleaks TOML that cannot be used (syntax, a bad regex, an unknown
// condition). The error names the file and what is wrong.
var ErrBadConfig = errors.New("bad gitleaks config")

// tomlConfig is a gitleaks configuration file as gitleaks reads it (config.ViperConfig).
type tomlConfig struct {
	Title  string
	Extend struct {
		Path          string
		URL           string
		UseDefault    bool     `toml:"useDefault"`
		DisabledRules []string `toml:"disabledRules"`
	}
	Rules []struct {
		ID          string
		Description string
		Path        string
		Regex       string
		SecretGroup int `toml:"secretGroup"`
		Entropy     float64
		Keywords    []string
		Tags        []string
		AllowList   *tomlAllowlist   `toml:"allowlist"`
		Allowlists  []*tomlAllowlist `toml:"allowlists"`
		Required    []struct {
			ID            string
			WithinLines   *int `toml:"withinLines"`
			WithinColumns *int `toml:"withinColumns"`
		}
		SkipReport bool `toml:"skipReport"`
	}
	AllowList  *tomlAllowlist   `toml:"allowlist"`
	Allowlists []*tomlAllowlist `toml:"allowlists"`
}

type tomlAllowlist struct {
	Description string
	Condition   string
	Commits     []string
	Paths       []string
	RegexTarget string `toml:"regexTarget"`
	Regexes     []string
	StopWords   []string `toml:"stopwords"`
	TargetRules []string `toml:"targetRules"`
}

// Rules is a compiled rule set: gitleaks' config.Config.
type Rules struct {
	rules      map[string]*rule
	order      []string // rule ids in gitleaks' order (sorted once a config extends another)
	keywords   []string // every rule's keywords, lower case
	pre        *prefilter
	allowlists []*allowlist
}

type rule struct {
	id          string
	regex, path *lazyRE
	sh          *shape // the regex's windows and probe (window.go); nil without a regex
	secretGroup int
	entropy     float64
	keywords    []string
	allowlists  []*allowlist
	required    []required
	skipReport  bool
}

type required struct {
	id                      string
	withinLines, withinCols *int
}

type allowlist struct {
	and         bool
	commits     map[string]bool
	paths       *lazyRE
	regexes     *lazyRE
	regexTarget string // "" (the secret), "match" or "line"
	stopwords   []string
	nPaths      int
	nRegexes    int
}

// defaultName names the embedded default rules; they compile lazily (lazyRE).
const defaultName = "gitleaks default config"

var (
	defaultOnce  sync.Once
	defaultRules *Rules
	defaultErr   error
)

// Default is gitleaks' default rule set, compiled on the first call.
func Default() (*Rules, error) {
	defaultOnce.Do(func() { defaultRules, defaultErr = parse(defaultTOML, defaultName, 0) })
	return defaultRules, defaultErr
}

// Load reads the gitleaks TOML at path ("" = the default rules). As in gitleaks, the file
// replaces the default rules unless it says `[extend] useDefault = true` (or extends another
// file with `[extend] path`), and `disabledRules` drops rules of what it extends.
func Load(path string) (*Rules, error) {
	if path == "" {
		return Default()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets config: %w", err)
	}
	return parse(string(b), path, 0)
}

const maxExtendDepth = 2 // gitleaks' limit

func parse(text, name string, depth int) (*Rules, error) {
	var tc tomlConfig
	if err := toml.Unmarshal([]byte(text), &tc); err != nil {
		return nil, fmt.Errorf("%w %s: %v", ErrBadConfig, name, err)
	}
	rs, targeted, err := translate(&tc, name, name != defaultName)
	if err != nil {
		return nil, err
	}
	if depth < maxExtendDepth {
		var base *Rules
		switch {
		case tc.Extend.Path != "" && tc.Extend.UseDefault:
			return nil, fmt.Errorf("%w %s: extend.path and extend.useDefault are both set", ErrBadConfig, name)
		case tc.Extend.UseDefault:
			base, err = parse(defaultTOML, defaultName, depth+1)
		case tc.Extend.Path != "":
			b, rerr := os.ReadFile(tc.Extend.Path)
			if rerr != nil {
				return nil, fmt.Errorf("%w %s: extend.path: %v", ErrBadConfig, name, rerr)
			}
			base, err = parse(string(b), tc.Extend.Path, depth+1)
		}
		if err != nil {
			return nil, err
		}
		if base != nil {
			rs.extend(base, tc.Extend.DisabledRules)
		}
	}
	for id, al := range targeted {
		r, ok := rs.rules[id]
		if !ok {
			return nil, fmt.Errorf("%w %s: [[allowlists]] target rule %q does not exist", ErrBadConfig, name, id)
		}
		r.allowlists = append(r.allowlists, al...)
	}
	for _, r := range rs.rules {
		for _, q := range r.required {
			if _, ok := rs.rules[q.id]; !ok {
				return nil, fmt.Errorf("%w %s: rule %s requires %q, which does not exist", ErrBadConfig, name, r.id, q.id)
			}
		}
	}
	rs.keywords = rs.keywords[:0]
	seen := map[string]bool{}
	for _, r := range rs.rules {
		for _, k := range r.keywords {
			if !seen[k] {
				seen[k] = true
				rs.keywords = append(rs.keywords, k)
			}
		}
	}
	sort.Strings(rs.keywords)
	rs.pre = newPrefilter(rs.keywords)
	return rs, nil
}

// translate is gitleaks' ViperConfig.Translate without the extension: the rules, the global
// allowlists, and the allowlists that target rules by id.
func translate(tc *tomlConfig, name string, eager bool) (*Rules, map[string][]*allowlist, error) {
	rs := &Rules{rules: map[string]*rule{}}
	bad := func(what string, err error) error { return fmt.Errorf("%w %s: %s: %v", ErrBadConfig, name, what, err) }
	for _, tr := range tc.Rules {
		r := &rule{id: tr.ID, secretGroup: tr.SecretGroup, entropy: tr.Entropy, skipReport: tr.SkipReport}
		var err error
		if tr.Regex != "" {
			if r.regex, err = newRE(tr.Regex, eager); err != nil {
				return nil, nil, bad("rule "+tr.ID+" regex", err)
			}
		}
		if tr.Path != "" {
			if r.path, err = newRE(tr.Path, eager); err != nil {
				return nil, nil, bad("rule "+tr.ID+" path", err)
			}
		}
		if r.regex == nil && r.path == nil {
			return nil, nil, bad("rule "+tr.ID, errors.New("neither regex nor path"))
		}
		for _, k := range tr.Keywords {
			r.keywords = append(r.keywords, strings.ToLower(k))
		}
		if r.regex != nil {
			r.sh = &shape{pattern: tr.Regex, keywords: slices.Clone(r.keywords)}
		}
		als := tr.Allowlists
		if tr.AllowList != nil {
			if len(als) > 0 {
				return nil, nil, bad("rule "+tr.ID, errors.New("[rules.allowlist] cannot be used alongside [[rules.allowlists]]"))
			}
			als = []*tomlAllowlist{tr.AllowList}
		}
		for _, ta := range als {
			al, err := compileAllowlist(ta, eager)
			if err != nil {
				return nil, nil, bad("rule "+tr.ID+" allowlist", err)
			}
			r.allowlists = append(r.allowlists, al)
		}
		for _, q := range tr.Required {
			r.required = append(r.required, required{id: q.ID, withinLines: q.WithinLines, withinCols: q.WithinColumns})
		}
		if _, dup := rs.rules[r.id]; !dup {
			rs.order = append(rs.order, r.id)
		}
		rs.rules[r.id] = r
	}
	als := tc.Allowlists
	if tc.AllowList != nil {
		if len(als) > 0 {
			return nil, nil, bad("[allowlist]", errors.New("cannot be used alongside [[allowlists]]"))
		}
		als = []*tomlAllowlist{tc.AllowList}
	}
	targeted := map[string][]*allowlist{}
	for _, ta := range als {
		al, err := compileAllowlist(ta, eager)
		if err != nil {
			return nil, nil, bad("[[allowlists]]", err)
		}
		if len(ta.TargetRules) == 0 {
			rs.allowlists = append(rs.allowlists, al)
		}
		for _, id := range ta.TargetRules {
			targeted[id] = append(targeted[id], al)
		}
	}
	return rs, targeted, nil
}

func compileAllowlist(ta *tomlAllowlist, eager bool) (*allowlist, error) {
	al := &allowlist{}
	switch strings.ToUpper(ta.Condition) {
	case "AND", "&&":
		al.and = true
	case "", "OR", "||":
	default:
		return nil, fmt.Errorf("unknown condition %q (expected and, or)", ta.Condition)
	}
	switch ta.RegexTarget {
	case "", "secret":
	case "match", "line":
		al.regexTarget = ta.RegexTarget
	default:
		return nil, fmt.Errorf("unknown regexTarget %q (expected match, line)", ta.RegexTarget)
	}
	if len(ta.Commits)+len(ta.Paths)+len(ta.Regexes)+len(ta.StopWords) == 0 {
		return nil, errors.New("must contain at least one check for: commits, paths, regexes, or stopwords")
	}
	if len(ta.Commits) > 0 {
		al.commits = map[string]bool{}
		for _, c := range ta.Commits {
			al.commits[strings.ToLower(strings.TrimSpace(c))] = true
		}
	}
	for _, w := range ta.StopWords {
		al.stopwords = append(al.stopwords, strings.ToLower(w))
	}
	var err error
	if al.paths, err = joinOr(ta.Paths, eager); err != nil {
		return nil, err
	}
	if al.regexes, err = joinOr(ta.Regexes, eager); err != nil {
		return nil, err
	}
	al.nPaths, al.nRegexes = len(ta.Paths), len(ta.Regexes)
	return al, nil
}

// joinOr is patterns as one alternation, as gitleaks' joinRegexOr makes it; eager: each
// pattern checked on its own first, so the error names a pattern, not the alternation.
func joinOr(pats []string, eager bool) (*lazyRE, error) {
	if len(pats) == 0 {
		return nil, nil
	}
	if eager {
		for _, p := range pats {
			if _, err := regexp.Compile(p); err != nil {
				return nil, err
			}
		}
	}
	return newRE("(?:"+strings.Join(pats, "|")+")", eager)
}

// extend merges base (what this config extends) into rs, as gitleaks' Config.extend does:
// base's rules are added unless disabled, a rule both define takes rs's non-empty fields
// over base's and the union of tags, keywords and allowlists, and base's global allowlists
// are appended. The rule order becomes sorted by id (gitleaks sorts after extending).
func (rs *Rules) extend(base *Rules, disabled []string) {
	off := map[string]bool{}
	for _, id := range disabled {
		off[id] = true
	}
	for _, id := range base.order {
		if off[id] {
			continue
		}
		b := *base.rules[id]
		cur, ok := rs.rules[id]
		if !ok {
			rs.rules[id] = &b
			rs.order = append(rs.order, id)
			continue
		}
		if cur.entropy != 0 {
			b.entropy = cur.entropy
		}
		if cur.secretGroup != 0 {
			b.secretGroup = cur.secretGroup
		}
		if cur.regex != nil {
			b.regex, b.sh = cur.regex, cur.sh
		}
		if cur.path != nil {
			b.path = cur.path
		}
		b.keywords = append(append([]string{}, b.keywords...), cur.keywords...)
		b.allowlists = append(append([]*allowlist{}, b.allowlists...), cur.allowlists...)
		rs.rules[id] = &b
	}
	rs.allowlists = append(rs.allowlists, base.allowlists...)
	sort.Strings(rs.order)
}

// RuleCount is the number of rules (for the log line when the rules load).
func (rs *Rules) RuleCount() int { return len(rs.rules) }
