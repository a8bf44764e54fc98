package gitattr

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// TreeSource reads the .gitattributes of a directory ("" the root) from the tree being
// checked out: git reads a checkout's attributes from what it checks out, so a file and
// the .gitattributes that names its filter may arrive together. ok false: not in the tree.
type TreeSource func(dir string) (data []byte, ok bool)

// Engine answers, for the work tree of one repository, what `git add` stores for a file's
// bytes and what `git checkout` writes for a blob. Safe for one goroutine at a time plus
// Close from another.
type Engine struct {
	dir, gitDir string

	mu      sync.Mutex
	eol     eolConfig
	drivers map[string]*Driver
	global  string // core.attributesFile as configured ("" the XDG default)

	info   *attrFile   // $GIT_DIR/info/attributes: above the tree's
	outer  []*attrFile // the global file, then the system one: below the tree's
	macros map[string][]assign
	dirs   map[string]*attrFile // per directory, this generation; nil: none that matters
	tree   TreeSource

	procs map[string]*procFilter
}

// New makes the engine of the work tree dir whose (common) git directory is gitDir, with cfg the
// pairs of `git config -z --list` (keys lower-cased).
func New(dir, gitDir string, cfg [][2]string) *Engine {
	e := &Engine{dir: dir, gitDir: gitDir, procs: map[string]*procFilter{}}
	e.SetConfig(cfg)
	return e
}

// SetConfig replaces the git config the engine acts on; running filter processes end
// when their driver's command changed.
func (e *Engine) SetConfig(cfg [][2]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.eol = eolConfig{}
	e.global = ""
	drivers := map[string]*Driver{}
	for _, kv := range cfg {
		k, v := kv[0], kv[1]
		switch k {
		case "core.autocrlf":
			e.eol.autocrlf = boolish(v, "input")
		case "core.eol":
			e.eol.eol = strings.ToLower(v)
		case "core.attributesfile":
			e.global = v
		}
		rest, ok := strings.CutPrefix(k, "filter.")
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '.')
		if i <= 0 {
			continue
		}
		name, key := rest[:i], rest[i+1:]
		d := drivers[name]
		if d == nil {
			d = &Driver{Name: name}
			drivers[name] = d
		}
		switch key {
		case "clean":
			d.Clean = v
		case "smudge":
			d.Smudge = v
		case "process":
			d.Process = v
		case "required":
			d.Required = boolish(v, "") == "true"
		}
	}
	for name, p := range e.procs {
		if d := drivers[name]; d == nil || e.drivers[name] == nil || d.Process != e.drivers[name].Process {
			p.close()
			delete(e.procs, name)
		}
	}
	e.drivers = drivers
	e.dirs = nil
}

// boolish normalises a git boolean ("yes", "on", "1", "true" → "true"); keep is a value
// passed through as itself ("input" for core.autocrlf).
func boolish(v, keep string) string {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1", "":
		return "true"
	case keep:
		return keep
	}
	return "false"
}

// Reset starts a new operation: attribute files are read again (lazily), from tree first
// when it is not nil (a checkout), else from the work tree.
func (e *Engine) Reset(tree TreeSource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.tree = tree
	e.dirs = nil
}

// Drivers lists the filter drivers git config defines, by name.
func (e *Engine) Drivers() map[string]Driver {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]Driver, len(e.drivers))
	for n, d := range e.drivers {
		out[n] = *d
	}
	return out
}

// load reads the attribute sources outside the tree and the root's, once a generation.
func (e *Engine) load() {
	if e.dirs != nil {
		return
	}
	e.dirs = map[string]*attrFile{}
	e.macros = map[string][]assign{}
	for n, m := range builtinMacros {
		e.macros[n] = m
	}
	var system *attrFile
	if os.Getenv("GIT_ATTR_NOSYSTEM") == "" {
		system = readAttrFile("/etc/gitattributes")
	}
	global := readAttrFile(e.globalFile())
	root := e.readDir("")
	info := readAttrFile(filepath.Join(e.gitDir, "info", "attributes"))
	for _, f := range []*attrFile{system, global, root, info} { // later definitions win
		if f == nil {
			continue
		}
		for _, r := range f.rules {
			if r.macro != "" {
				e.macros[r.macro] = r.assigns
			}
		}
	}
	e.info, e.outer = e.keep(info), nil
	for _, f := range []*attrFile{global, system} {
		if f = e.keep(f); f != nil {
			e.outer = append(e.outer, f)
		}
	}
	e.dirs[""] = e.keep(root)
}

// keep is f when it can change a file's bytes, else nil.
func (e *Engine) keep(f *attrFile) *attrFile {
	if f == nil || !f.relevant(e.macros) {
		return nil
	}
	return f
}

// globalFile is core.attributesFile, or $XDG_CONFIG_HOME/git/attributes, or
// ~/.config/git/attributes.
func (e *Engine) globalFile() string {
	if p := e.global; p != "" {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				return filepath.Join(home, rest)
			}
		}
		if !filepath.IsAbs(p) {
			return filepath.Join(e.dir, p)
		}
		return p
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "git", "attributes")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "git", "attributes")
	}
	return ""
}

func readAttrFile(p string) *attrFile {
	if p == "" {
		return nil
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	f := parseAttrs(b, "", true)
	return &f
}

// readDir reads dir's .gitattributes, from the tree being checked out first.
func (e *Engine) readDir(dir string) *attrFile {
	var data []byte
	ok := false
	if e.tree != nil {
		data, ok = e.tree(dir)
	}
	if !ok {
		b, err := os.ReadFile(filepath.Join(e.dir, filepath.FromSlash(dir), ".gitattributes"))
		if err != nil {
			return nil
		}
		data = b
	}
	f := parseAttrs(data, dir, dir == "")
	return &f
}

// stack is the attribute files that apply to rel, highest priority first: info, the
// deepest directory's up to the root's, the global, the system. nil: none that matters.
func (e *Engine) stack(rel string) []*attrFile {
	e.load()
	var out []*attrFile
	if e.info != nil {
		out = append(out, e.info)
	}
	for d := path.Dir(rel); ; d = path.Dir(d) {
		if d == "." || d == "/" {
			d = ""
		}
		f, seen := e.dirs[d]
		if !seen {
			f = e.keep(e.readDir(d))
			e.dirs[d] = f
		}
		if f != nil {
			out = append(out, f)
		}
		if d == "" {
			break
		}
	}
	out = append(out, e.outer...)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Conv is what git does to one path's bytes.
type Conv struct {
	e      *Engine
	Path   string
	Filter string  // the filter attribute's driver name, "" none
	drv    *Driver // its config, nil: not defined
	crlf   crlfAction
}

// Conv answers for the file rel (slash-separated, from the root).
func (e *Engine) Conv(rel string) Conv {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := Conv{e: e, Path: rel, crlf: crlfBinary}
	st := e.stack(rel)
	if st == nil {
		if e.eol.autocrlf == "true" || e.eol.autocrlf == "input" {
			c.crlf = e.eol.action(nil)
		}
		return c
	}
	attrs := resolve(rel, st, e.macros)
	c.crlf = e.eol.action(attrs)
	if f := attrs["filter"]; f.state == 'v' {
		c.Filter = f.val
		c.drv = e.drivers[f.val]
	}
	return c
}

// Identity says the bytes pass unchanged both ways: no filter, no line-ending rule (the
// zero Conv too).
func (c Conv) Identity() bool { return c.e == nil || c.Filter == "" && c.crlf == crlfBinary }

// Undefined says the filter attribute names a driver git config does not define (a
// git-crypt repo not unlocked here): git then stores the bytes as they are.
func (c Conv) Undefined() bool { return c.Filter != "" && c.drv == nil }

// Clean is what `git add` stores for data: the clean filter, then CRLF to LF.
// indexHasCR says whether the path's current blob holds a CR (text=auto leaves such a
// file alone); nil for none. A driver that fails, or is required and has no clean or
// process command, is a *FilterError (ErrFilter).
func (c Conv) Clean(data []byte, indexHasCR func() bool) ([]byte, error) {
	out, err := c.e.filter(c, "clean", data)
	if err != nil {
		return nil, err
	}
	return crlfToGit(c.crlf, out, indexHasCR), nil
}

// Smudge is what `git checkout` writes for blob: LF to CRLF where asked, then the smudge
// filter.
func (c Conv) Smudge(blob []byte) ([]byte, error) {
	c.e.mu.Lock()
	eol := c.e.eol
	c.e.mu.Unlock()
	return c.e.filter(c, "smudge", eol.crlfToWorktree(c.crlf, blob))
}

// filter runs the driver's op on data: the process if there is one, else the command.
func (e *Engine) filter(c Conv, op string, data []byte) ([]byte, error) {
	d := c.drv
	if d == nil || !d.configured(op) {
		if d != nil && d.Required {
			return nil, &FilterError{Driver: c.Filter, Path: c.Path, Op: op, Err: errors.New("required, but no command is configured")}
		}
		return data, nil
	}
	var out []byte
	var err error
	if d.Process != "" {
		out, err = e.viaProcess(d, op, c.Path, data)
	} else {
		cmd := d.Clean
		if op == "smudge" {
			cmd = d.Smudge
		}
		out, err = runCommand(e.dir, cmd, c.Path, data)
	}
	if err != nil {
		return nil, &FilterError{Driver: c.Filter, Path: c.Path, Op: op, Err: err}
	}
	return out, nil
}

// viaProcess runs one request on the driver's long-running process, started on first use
// and started again when it has died.
func (e *Engine) viaProcess(d *Driver, op, rel string, data []byte) ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.procs[d.Name]
	if p != nil && !p.alive() {
		p.close()
		p = nil
	}
	if p == nil {
		var err error
		if p, err = startProcess(e.dir, d.Process); err != nil {
			return nil, fmt.Errorf("start %q: %w", d.Process, err)
		}
		e.procs[d.Name] = p
	}
	out, err := p.run(op, rel, data)
	if err != nil && !p.alive() {
		delete(e.procs, d.Name)
	}
	return out, err
}

// Close ends the engine's filter processes.
func (e *Engine) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for n, p := range e.procs {
		p.close()
		delete(e.procs, n)
	}
}
