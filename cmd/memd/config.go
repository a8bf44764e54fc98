package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/memd-dev/memd"
)

// configPath resolves which config file to read: --config, else $MEMD_CONFIG, else
// $XDG_CONFIG_HOME/memd/config.yaml (~/.config/memd/config.yaml). explicit is true when the
// user named the file, which then must exist.
func configPath(flagValue string) (path string, explicit bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if v := os.Getenv("MEMD_CONFIG"); v != "" {
		return v, true
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "memd", "config.yaml"), false
}

// loadConfig reads the YAML file over the defaults. ${VAR} expands from the environment;
// unknown keys and wrong types are errors naming the key (exit 2 for the caller), never the
// value when it came from ${VAR}: the returned envValues hides it in later errors too.
func loadConfig(path string, explicit bool) (memd.Config, *envValues, error) {
	cfg := memd.DefaultConfig()
	if path == "" {
		return cfg, nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return cfg, nil, nil
		}
		return cfg, nil, fmt.Errorf("config %s: %w", path, err)
	}
	ev, err := parseConfigEnv(data, &cfg)
	if err != nil {
		return cfg, ev, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, ev, nil
}

func parseConfig(data []byte, cfg *memd.Config) error {
	_, err := parseConfigEnv(data, cfg)
	return err
}

// parseConfigEnv is parseConfig that also says which keys took a value from ${VAR}, so a
// later validation error can hide it too (envValues.hide).
func parseConfigEnv(data []byte, cfg *memd.Config) (*envValues, error) {
	expanded, ev := expandEnvSpans(string(data))
	if strings.TrimSpace(expanded) == "" {
		return ev, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(expanded), &doc); err != nil {
		return ev, fmt.Errorf("%w: %s%s", memd.ErrBadConfig, ev.scrub(strings.TrimPrefix(err.Error(), "yaml: "), nil), ev.usedHint())
	}
	if len(doc.Content) == 0 {
		return ev, nil
	}
	ev.index(expanded, &doc)
	return ev, ev.decodeInto(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// decodeInto walks the YAML mapping along the struct's yaml tags, so every error names the
// full key (sync.author.name) and the value that was wrong, and unknown keys are refused.
func (ev *envValues) decodeInto(n *yaml.Node, v reflect.Value, prefix string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeOf(memd.Duration(0)) {
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return ev.configError(n, keyOr(prefix), nodeText(n), "must be a mapping of keys")
		}
		fields := map[string]reflect.Value{}
		for i := 0; i < v.NumField(); i++ {
			tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]
			if tag != "" && tag != "-" {
				fields[tag] = v.Field(i)
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := prefix + k.Value
			if names := ev.from(k); names != "" {
				key = prefix + "(a key from " + names + ")"
			}
			f, ok := fields[k.Value]
			if !ok {
				return ev.configError(val, key, nodeText(val), fmt.Sprintf("unknown key (line %d)", k.Line))
			}
			if names := ev.from(val); names != "" {
				ev.keys[key] = names
			}
			if err := ev.decodeInto(val, f, key+"."); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64 && v.Type() != reflect.TypeOf(memd.Duration(0)) {
		// yaml.v3 would truncate 1.5 into 1 without a word.
		return ev.configError(n, keyOr(prefix), n.Value, fmt.Sprintf("must be a whole number (line %d)", n.Line))
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		msg := err.Error()
		if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
			msg = msg[i+2:]
		}
		return ev.configError(n, keyOr(prefix), nodeText(n), fmt.Sprintf("%s (line %d)", msg, n.Line))
	}
	return nil
}

func keyOr(prefix string) string {
	if k := strings.TrimSuffix(prefix, "."); k != "" {
		return k
	}
	return "(top level)"
}

// nodeText renders a node's value for an error message.
func nodeText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// envRef is ${NAME} (the documented form) or $$ (a literal dollar). A bare $NAME is left as
// it is, so a dollar in a value (an argument, a name) is never silently replaced.
var envRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// envValues remembers where ${VAR} put text into the expanded config, so that no error
// ever prints what came from the environment: only the key and the variable's name.
type envValues struct {
	spans []envSpan
	// nodes: YAML nodes whose source holds expanded text, with the variables' names.
	nodes map[*yaml.Node]string
	// keys: full config keys whose value holds expanded text.
	keys map[string]string
}

type envSpan struct {
	start, end int // in the expanded text
	name       string
	value      string
}

func expandEnvSpans(s string) (string, *envValues) {
	ev := &envValues{nodes: map[*yaml.Node]string{}, keys: map[string]string{}}
	var b strings.Builder
	last := 0
	for _, m := range envRef.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[0]])
		last = m[1]
		if m[2] < 0 { // $$
			b.WriteByte('$')
			continue
		}
		name := s[m[2]:m[3]]
		v := os.Getenv(name)
		ev.spans = append(ev.spans, envSpan{start: b.Len(), end: b.Len() + len(v), name: "${" + name + "}", value: v})
		b.WriteString(v)
	}
	b.WriteString(s[last:])
	return b.String(), ev
}

// index marks every node of doc that holds expanded text: the last node starting at or
// before a span's start, and every node starting inside it.
func (ev *envValues) index(text string, doc *yaml.Node) {
	if len(ev.spans) == 0 {
		return
	}
	lineStart := []int{0}
	for i := 0; i < len(text); i++ {
		if text[i] == '\n' {
			lineStart = append(lineStart, i+1)
		}
	}
	type at struct {
		off int
		n   *yaml.Node
	}
	var all []at
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Line >= 1 && n.Line <= len(lineStart) {
			off := lineStart[n.Line-1]
			for col := 1; col < n.Column && off < len(text) && text[off] != '\n'; col++ {
				_, size := utf8.DecodeRuneInString(text[off:])
				off += size
			}
			all = append(all, at{off, n})
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	sort.SliceStable(all, func(i, j int) bool { return all[i].off < all[j].off })
	mark := func(n *yaml.Node, name string) {
		if !strings.Contains(ev.nodes[n], name) {
			ev.nodes[n] = strings.TrimPrefix(ev.nodes[n]+", "+name, ", ")
		}
	}
	for _, sp := range ev.spans {
		var before *yaml.Node
		for _, a := range all {
			if a.off <= sp.start && (a.n.Kind == yaml.ScalarNode || before == nil) {
				before = a.n
			}
			if a.off >= sp.start && a.off < sp.end {
				mark(a.n, sp.name)
			}
		}
		if before != nil {
			mark(before, sp.name)
		}
	}
}

// usedHint tells a YAML syntax error that text from the environment was part of what was
// parsed (a value with a quote or a colon can break the file), naming the variables only.
func (ev *envValues) usedHint() string {
	var names []string
	for _, sp := range ev.spans {
		if sp.value != "" && !slices.Contains(names, sp.name) {
			names = append(names, sp.name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return " (the file takes text from " + strings.Join(names, ", ") + ", read as YAML where it stands; its value is not shown)"
}

// from names the variables that put text into n or anything under it; "" if none.
func (ev *envValues) from(n *yaml.Node) string {
	if ev == nil || len(ev.nodes) == 0 {
		return ""
	}
	var names []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if v := ev.nodes[n]; v != "" {
			for _, name := range strings.Split(v, ", ") {
				if !slices.Contains(names, name) {
					names = append(names, name)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(names, ", ")
}

// configError is the error for node n at key: its value hidden when it came from ${VAR}.
func (ev *envValues) configError(n *yaml.Node, key, value, problem string) error {
	names := ev.from(n)
	if names == "" {
		return &memd.ConfigError{Key: key, Value: value, Problem: ev.scrub(problem, nil)}
	}
	// Decoders quote the value in their message (yaml's `...`, cut to a prefix when long;
	// Duration's "..."), perhaps escaped: drop every quoted part.
	problem = stripQuoted(replaceNonEmpty(problem, value))
	return &memd.ConfigError{Key: key, Problem: ev.scrub(problem, &names), FromEnv: names}
}

// stripQuoted replaces the `...` and "..." parts of a decoder's message with "…".
func stripQuoted(s string) string {
	for _, q := range []string{"`", `"`} {
		if i := strings.Index(s, q); i >= 0 {
			if j := strings.LastIndex(s, q); j > i {
				s = s[:i] + "…" + s[j+1:]
			}
		}
	}
	return s
}

// scrub removes expanded values from a message: those of the error's own variables
// (names) whatever their length, and every other one long enough not to be a common word.
func (ev *envValues) scrub(msg string, names *string) string {
	for _, sp := range ev.spans {
		if sp.value == "" {
			continue
		}
		own := names != nil && strings.Contains(*names, sp.name)
		if own || len(sp.value) >= 4 {
			msg = strings.ReplaceAll(msg, sp.value, sp.name)
		}
	}
	return msg
}

// hide rewrites a validation error (memd.Config.Validate, resolve) whose key took its
// value from ${VAR}: the key and the variable's name, never the value.
func (ev *envValues) hide(err error) error {
	var ce *memd.ConfigError
	if ev == nil || len(ev.spans) == 0 || !errors.As(err, &ce) || ce.FromEnv != "" {
		return err
	}
	key := ce.Key
	if i := strings.IndexByte(key, '['); i >= 0 {
		key = key[:i] // watch.ignore[2]
	}
	var names string
	for k, v := range ev.keys {
		if k == key || strings.HasPrefix(k, key+".") { // sync.author covers .name and .email
			names = strings.TrimPrefix(names+", "+v, ", ")
		}
	}
	if names == "" {
		return &memd.ConfigError{Key: ce.Key, Value: ev.scrub(ce.Value, nil), Problem: ev.scrub(ce.Problem, nil)}
	}
	return &memd.ConfigError{Key: ce.Key, Problem: ev.scrub(replaceNonEmpty(ce.Problem, ce.Value), &names), FromEnv: names}
}

func replaceNonEmpty(s, value string) string {
	if value == "" {
		return s
	}
	return strings.ReplaceAll(s, value, "…")
}
