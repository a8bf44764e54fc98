package gitattr

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// value is one attribute's state for a path: unspecified (the zero value), set, unset
// ("-name") or a string ("name=value").
type value struct {
	state byte // 0 unspecified, 's' set, 'u' unset, 'v' value
	val   string
}

func (v value) set() bool   { return v.state == 's' }
func (v value) unset() bool { return v.state == 'u' }

// assign is one "name", "-name", "!name" or "name=value" of a line. An explicit "!name"
// is a state too: it stops lower lines from deciding name.
type assign struct {
	name string
	v    value
	spec bool // "!name": decided as unspecified
}

// rule is one line of an attributes file: a pattern and its assignments, or a macro.
type rule struct {
	pattern  string // without a leading "/"
	nodir    bool   // no "/" in the pattern: matched against the basename
	mustDir  bool   // trailing "/": matches only directories, so never a file
	assigns  []assign
	macro    string // "[attr]name" lines: the macro's name, pattern unused
	anchored bool
}

// attrFile is one parsed attributes file, with base the directory its paths are relative
// to ("" for the root and for the files outside the tree).
type attrFile struct {
	base  string
	rules []rule
}

// interesting are the attributes memd acts on; a file naming none of them (and no macro)
// changes nothing, which is what keeps the fast path.
var interesting = map[string]bool{"filter": true, "text": true, "eol": true, "crlf": true, "binary": true}

// parseAttrs parses an attributes file as git's attr.c does. Macros are kept only where
// git allows them (macroOK: the root file, info/attributes, the global and system files).
func parseAttrs(data []byte, base string, macroOK bool) (f attrFile) {
	f.base = base
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r, ok := parseLine(sc.Text())
		if !ok || (r.macro != "" && !macroOK) {
			continue
		}
		f.rules = append(f.rules, r)
	}
	return f
}

// relevant says whether any line of f can change a file's bytes: it names one of the
// interesting attributes or a macro (whose expansion might).
func (f *attrFile) relevant(macros map[string][]assign) bool {
	for _, r := range f.rules {
		for _, a := range r.assigns {
			if _, m := macros[a.name]; interesting[a.name] || m {
				return true
			}
		}
	}
	return false
}

func parseLine(line string) (rule, bool) {
	line = strings.TrimLeft(line, " \t\r\n")
	line = strings.TrimRight(line, "\r")
	if line == "" || line[0] == '#' {
		return rule{}, false
	}
	var pat, rest string
	if line[0] == '"' {
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			return rule{}, false
		}
		if pat, err = strconv.Unquote(q); err != nil {
			return rule{}, false
		}
		rest = line[len(q):]
	} else {
		i := strings.IndexAny(line, " \t")
		if i < 0 {
			pat = line
		} else {
			pat, rest = line[:i], line[i:]
		}
	}
	var r rule
	if strings.HasPrefix(pat, "[attr]") {
		r.macro = pat[len("[attr]"):]
	} else {
		if strings.HasPrefix(pat, "!") {
			return rule{}, false // negative patterns are forbidden in attributes (git warns)
		}
		if strings.HasSuffix(pat, "/") {
			r.mustDir = true
			pat = strings.TrimSuffix(pat, "/")
		}
		r.nodir = !strings.Contains(pat, "/")
		r.anchored = strings.HasPrefix(pat, "/")
		r.pattern = strings.TrimPrefix(pat, "/")
	}
	for _, tok := range strings.Fields(rest) {
		var a assign
		switch {
		case strings.HasPrefix(tok, "-"):
			a = assign{name: tok[1:], v: value{state: 'u'}}
		case strings.HasPrefix(tok, "!"):
			a = assign{name: tok[1:], spec: true}
		default:
			name, v, isVal := strings.Cut(tok, "=")
			a = assign{name: name, v: value{state: 's'}}
			if isVal {
				a.v = value{state: 'v', val: v}
			}
		}
		if a.name != "" {
			r.assigns = append(r.assigns, a)
		}
	}
	return r, true
}

// matches says whether the rule's pattern matches the file rel (slash-separated, from the
// work tree root) for an attributes file whose directory is base.
func (r *rule) matches(rel, base string) bool {
	if r.macro != "" || r.mustDir {
		return false
	}
	if base != "" {
		if !strings.HasPrefix(rel, base+"/") {
			return false
		}
		rel = rel[len(base)+1:]
	}
	if r.nodir {
		name := rel
		if i := strings.LastIndexByte(rel, '/'); i >= 0 {
			name = rel[i+1:]
		}
		return wildmatch(r.pattern, name, false)
	}
	return wildmatch(r.pattern, rel, true)
}

// builtinMacros are git's own: binary is -diff -merge -text.
var builtinMacros = map[string][]assign{
	"binary": {{name: "diff", v: value{state: 'u'}}, {name: "merge", v: value{state: 'u'}}, {name: "text", v: value{state: 'u'}}},
}

// resolve fills the attributes of rel from files, highest priority first, as git's
// fill(): within a file the last matching line wins; a set macro expands in place.
func resolve(rel string, files []*attrFile, macros map[string][]assign) map[string]value {
	out := make(map[string]value, 4)
	decided := make(map[string]bool, 4)
	var fill func(as []assign)
	fill = func(as []assign) {
		for i := len(as) - 1; i >= 0; i-- {
			a := as[i]
			if decided[a.name] {
				continue
			}
			decided[a.name] = true
			if !a.spec {
				out[a.name] = a.v
			}
			if m, ok := macros[a.name]; ok && a.v.set() {
				fill(m)
			}
		}
	}
	for _, f := range files {
		for i := len(f.rules) - 1; i >= 0; i-- {
			if f.rules[i].matches(rel, f.base) {
				fill(f.rules[i].assigns)
			}
		}
	}
	return out
}
