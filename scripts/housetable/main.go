// Command housetable prints the figures issue 18 ("one house") is judged by, for a before/after
// table: lines of Go per package (tests excluded), the tree walkers, how many copies of each
// shared rule the code spells out, and the functions over 80 lines. It reads the source only
// (go/parser), so it runs on any checkout: `go run ./scripts/housetable -repo DIR`.
//
// What counts, so that two runs compare like with like:
//   - Product code is every non-test .go file outside bench/, scripts/, testdata/ and the
//     test-helper packages (internal/testutil, *test).
//   - A walker is a product function that descends a directory tree: it calls filepath.Walk,
//     filepath.WalkDir or fs.WalkDir, or it lists a directory (ReadDir, or a same-package
//     function that does) inside a loop or a closure that calls itself. Walks rooted in the
//     git dir (their root names gitDir) are counted apart: they walk git's files, not the
//     repo's.
//   - A literal copy is a string literal (struct tags aside) in product code equal to one of
//     the shared names; the one definition counts as a copy, so 1 is the goal.
//   - A rule copy is a product file with a function matching the rule's shape: time parsers call
//     time.Parse* on a record's time, atomic writers rename a temp over a file, temp namers
//     build a temp file name. Poll helpers are the non-Test functions in test files and
//     internal/testutil that loop on a time.Sleep against a deadline; slices/maps helpers are
//     functions (anywhere) by the names those packages answer (contains, inList, equal, sortedKeys).
//   - One spelling per name (issue 33): a re-export is a top-level `type X = p.Y`, `const X = p.Y`
//     or `var X = p.Y` in product code; the root's imports of the module are counted (0 is the
//     goal); and one home each for the --now parser (time.Parse of an RFC3339 layout in a
//     function that speaks of now), a worker pool (a go statement in a loop, a WaitGroup waited
//     on), a trailer parser (a function named for trailers that splits text), and the tests'
//     run-git and write-file helpers (non-test functions of test files or internal/testutil,
//     named for git or for writing, that run git or call os.WriteFile).
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// names are the shared literals of issue 18's "one vocabulary" (vocab.go: phases, modes,
// buckets and kinds are typed there), by what they name.
var names = []struct{ what, lit string }{
	{"ledger file", "memory.jsonl"},
	{"lock file", ".memory.lock"},
	{"phase expire", "expire"},
	{"phase arcs", "arcs"},
	{"phase/bucket archive", "archive"},
	{"phase tidy", "tidy"},
	{"commit kind change", "change"},
	{"commit kind sleep", "sleep"},
	{"commit kind merge", "merge"},
	{"bucket projects", "projects"},
	{"bucket areas", "areas"},
	{"bucket resources", "resources"},
	{"mode persistent", "persistent"},
	{"mode read-count", "read-count"},
	{"mode hard-expiry", "hard-expiry"},
	{"mode soft-expiry", "soft-expiry"},
	{"record note", "note"},
	{"temp suffix", ".tmp"},
	{"MEMORY.md", "MEMORY.md"},
	{"memory type task", "task"},
	{"memory type arc", "arc"},
	{"status active", "active"},
	{"status archived", "archived"},
}

type file struct {
	rel  string // slash path from the repo root
	pkg  string // directory
	test bool
	f    *ast.File
	src  []byte
}

func main() {
	repo := flag.String("repo", ".", "the checkout to measure")
	long := flag.Int("long", 80, "a function is long above this many lines")
	flag.BoolVar(&all, "all", false, "name every place (else the first six)")
	flag.Parse()
	if err := run(os.Stdout, *repo, *long); err != nil {
		fmt.Fprintln(os.Stderr, "housetable:", err)
		os.Exit(1)
	}
}

// run prints the figures for the checkout at repo.
func run(w io.Writer, repo string, long int) error {
	files, fset, err := load(repo)
	if err != nil {
		return err
	}
	product := func(f *file) bool {
		return !f.test && !strings.HasPrefix(f.rel, "bench/") && !strings.HasPrefix(f.rel, "scripts/") &&
			!strings.HasPrefix(f.rel, "internal/testutil/") && !strings.HasSuffix(f.pkg, "test")
	}

	// Lines per package.
	lines := map[string]int{}
	total, productTotal := 0, 0
	for _, f := range files {
		if f.test {
			continue
		}
		n := strings.Count(string(f.src), "\n")
		lines[f.pkg] += n
		total += n
		if product(f) {
			productTotal += n
		}
	}
	pkgs := slices.Sorted(maps.Keys(lines))
	fmt.Fprintln(w, "## Lines per package (non-test .go)")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| package | lines |")
	fmt.Fprintln(w, "|---|---:|")
	for _, p := range pkgs {
		fmt.Fprintf(w, "| %s | %d |\n", p, lines[p])
	}
	fmt.Fprintf(w, "| **total** | %d |\n", total)
	fmt.Fprintf(w, "| **product code** (no bench/, scripts/, test helpers) | %d |\n\n", productTotal)

	// Walkers.
	var work, gitWalks []string
	for _, f := range files {
		if !product(f) {
			continue
		}
		listers := listerFuncs(files, f.pkg)
		for _, d := range f.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if !isWalker(fd, listers) {
				continue
			}
			at := fmt.Sprintf("%s:%d %s", f.rel, fset.Position(fd.Pos()).Line, funcName(fd))
			if walksGitDir(f, fd) {
				gitWalks = append(gitWalks, at)
			} else {
				work = append(work, at)
			}
		}
	}
	fmt.Fprintf(w, "## Tree walkers: %d of the work tree, %d of the git dir\n\n", len(work), len(gitWalks))
	for _, at := range work {
		fmt.Fprintln(w, "-", at)
	}
	for _, at := range gitWalks {
		fmt.Fprintln(w, "- (git dir)", at)
	}
	fmt.Fprintln(w)

	// Literal copies.
	count := map[string][]string{}
	for _, f := range files {
		if !product(f) {
			continue
		}
		tags := map[*ast.BasicLit]bool{}
		ast.Inspect(f.f, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok && fl.Tag != nil {
				tags[fl.Tag] = true
			}
			return true
		})
		ast.Inspect(f.f, func(n ast.Node) bool {
			bl, ok := n.(*ast.BasicLit)
			if !ok || bl.Kind != token.STRING || tags[bl] {
				return true
			}
			s, err := strconv.Unquote(bl.Value)
			if err != nil {
				return true
			}
			count[s] = append(count[s], fmt.Sprintf("%s:%d", f.rel, fset.Position(bl.Pos()).Line))
			return true
		})
	}
	fmt.Fprintln(w, "## Copies of each rule")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| rule | copies | where |")
	fmt.Fprintln(w, "|---|---:|---|")
	for _, n := range names {
		at := count[n.lit]
		fmt.Fprintf(w, "| %s `%q` | %d | %s |\n", n.what, n.lit, len(at), brief(at))
	}
	// The state dir is spelled as a join of ".git" and "memd", or as one "/.git/memd" string.
	var state []string
	for _, f := range files {
		if !product(f) {
			continue
		}
		ast.Inspect(f.f, func(n ast.Node) bool {
			if n == nil {
				return false
			}
			at := fmt.Sprintf("%s:%d", f.rel, fset.Position(n.Pos()).Line)
			switch n := n.(type) {
			case *ast.CallExpr:
				var git, memd bool
				for _, a := range n.Args {
					if bl, ok := a.(*ast.BasicLit); ok {
						git = git || bl.Value == `".git"`
						memd = memd || bl.Value == `"memd"`
					}
					git = git || strings.Contains(string(f.src[offset(f, a.Pos()):offset(f, a.End())]), "gitDir")
				}
				if git && memd {
					state = append(state, at)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && strings.Contains(n.Value, ".git/memd") {
					state = append(state, at)
				}
			}
			return true
		})
	}
	fmt.Fprintf(w, "| state dir `.git/memd` | %d | %s |\n", len(state), brief(state))
	// Inbox thresholds: constants named for them.
	var inbox []string
	for _, f := range files {
		if !product(f) {
			continue
		}
		for _, d := range f.f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				for _, sp := range g.Specs {
					for _, n := range sp.(*ast.ValueSpec).Names {
						if l := strings.ToLower(n.Name); strings.Contains(l, "inbox") && strings.Contains(l, "warn") {
							inbox = append(inbox, fmt.Sprintf("%s %s", f.rel, n.Name))
						}
					}
				}
			}
		}
	}
	fmt.Fprintf(w, "| inbox thresholds (constants) | %d | %s |\n", len(inbox), brief(inbox))
	// A second spelling: a top-level type, const or var that only renames another package's name.
	var aliases []string
	for _, f := range files {
		if product(f) {
			aliases = append(aliases, reexports(f, fset)...)
		}
	}
	fmt.Fprintf(w, "| re-export (a top-level name that is another package's) | %d | %s |\n", len(aliases), brief(aliases))
	rootImports := moduleImports(files, "memd (root)")
	fmt.Fprintf(w, "| the root's imports of the module | %d | %s |\n", len(rootImports), brief(rootImports))
	rules := []struct {
		what  string
		match func(f *file, fd *ast.FuncDecl) bool
		scope func(f *file) bool
	}{
		{"time parser (time.Parse* of a record time)", isTimeParser, product},
		{"atomic writer (temp renamed over a file)", isAtomicWriter, product},
		{"temp namer (builds a temp file name)", isTempNamer, product},
		{"note judge (lifecycle verdict)", isNoteJudge, product},
		{"poll helper (sleep loop against a deadline)", isPollHelper, func(f *file) bool {
			return f.test || strings.HasPrefix(f.rel, "internal/testutil/")
		}},
		{"hand-written slices/maps helper (contains, inList, equal, sortedKeys)", isSliceHelper, func(f *file) bool { return true }},
		{"`--now` parser (parses the flag's RFC3339 time)", isNowParser, product},
		{"worker pool (goroutines started in a loop, joined by a WaitGroup)", isWorkerPool, product},
		{"trailer parser (splits a commit message's trailers)", isTrailerParser, product},
		{"run-git test helper (runs the git binary for a test)", isGitTestHelper, testHelpers},
		{"write-file test helper (os.WriteFile for a test)", isWriteFileTestHelper, testHelpers},
	}
	for _, r := range rules {
		var at []string
		inFiles := map[string]bool{}
		for _, f := range files {
			if !r.scope(f) {
				continue
			}
			for _, d := range f.f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && r.match(f, fd) {
					at = append(at, fmt.Sprintf("%s %s", f.rel, funcName(fd)))
					inFiles[f.rel] = true
				}
			}
		}
		// A copy is a file that writes the rule (one file may need two functions for it).
		fmt.Fprintf(w, "| %s | %d | %s |\n", r.what, len(inFiles), brief(at))
	}
	fmt.Fprintln(w)

	// Long functions.
	type fn struct {
		at    string
		lines int
	}
	var longs []fn
	for _, f := range files {
		if !product(f) {
			continue
		}
		for _, d := range f.f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > long {
				longs = append(longs, fn{fmt.Sprintf("%s %s", f.rel, funcName(fd)), n})
			}
		}
	}
	slices.SortFunc(longs, func(a, b fn) int { return b.lines - a.lines })
	fmt.Fprintf(w, "## Functions over %d lines (product code): %d\n\n", long, len(longs))
	for _, l := range longs {
		fmt.Fprintf(w, "- %d %s\n", l.lines, l.at)
	}
	return nil
}

func load(repo string) ([]*file, *token.FileSet, error) {
	fset := token.NewFileSet()
	var files []*file
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != repo && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		af, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		rel = filepath.ToSlash(rel)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		if pkg == "." {
			pkg = "memd (root)"
		}
		files = append(files, &file{rel: rel, pkg: pkg, test: strings.HasSuffix(name, "_test.go"), f: af, src: src})
		return nil
	})
	return files, fset, err
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv != nil && len(fd.Recv.List) == 1 {
		t := fd.Recv.List[0].Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		if ix, ok := t.(*ast.IndexExpr); ok {
			t = ix.X
		}
		if id, ok := t.(*ast.Ident); ok {
			return id.Name + "." + fd.Name.Name
		}
	}
	return fd.Name.Name
}

// calleeName is "pkg.Func", "x.Method" (as ".Method") or "Func" for a call.
func calleeName(c *ast.CallExpr) string {
	switch fn := c.Fun.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		if id, ok := fn.X.(*ast.Ident); ok && (id.Name == "os" || id.Name == "filepath" || id.Name == "fs" || id.Name == "time") {
			return id.Name + "." + fn.Sel.Name
		}
		return "." + fn.Sel.Name
	}
	return ""
}

func calls(n ast.Node, pred func(string) bool) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && pred(calleeName(c)) {
			found = true
		}
		return !found
	})
	return found
}

// listsDir reports whether c lists a directory the caller chose (os.ReadDir of a constant
// path, such as /proc, is not a tree).
func listsDir(c *ast.CallExpr) bool {
	switch calleeName(c) {
	case ".ReadDir":
		return true
	case "os.ReadDir":
		bl, lit := c.Args[0].(*ast.BasicLit)
		return !lit || bl.Kind != token.STRING
	}
	return false
}

func callsListsDir(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && listsDir(c) {
			found = true
		}
		return !found
	})
	return found
}

// listerFuncs are the package's functions that list a directory once (ReadDir wrappers).
func listerFuncs(files []*file, pkg string) map[string]bool {
	out := map[string]bool{}
	for _, f := range files {
		if f.pkg != pkg || f.test {
			continue
		}
		for _, d := range f.f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && fd.Recv == nil && callsListsDir(fd.Body) {
				out[fd.Name.Name] = true
			}
		}
	}
	return out
}

func isWalker(fd *ast.FuncDecl, listers map[string]bool) bool {
	if calls(fd.Body, func(n string) bool { return n == "filepath.Walk" || n == "filepath.WalkDir" || n == "fs.WalkDir" }) {
		return true
	}
	lists := func(c *ast.CallExpr) bool { n := calleeName(c); return listsDir(c) || listers[n] && n != fd.Name.Name }
	walker := false
	// A listing inside a loop (a work queue) or a closure that calls itself descends.
	var visit func(n ast.Node, inLoop bool, recName string)
	visit = func(n ast.Node, inLoop bool, recName string) {
		ast.Inspect(n, func(m ast.Node) bool {
			if walker {
				return false
			}
			switch m := m.(type) {
			case *ast.ForStmt:
				visit(m.Body, true, recName)
				return false
			case *ast.AssignStmt:
				if len(m.Lhs) == 1 && len(m.Rhs) == 1 {
					if id, ok := m.Lhs[0].(*ast.Ident); ok {
						if fl, ok := m.Rhs[0].(*ast.FuncLit); ok && calls(fl.Body, func(n string) bool { return n == id.Name }) {
							visit(fl.Body, true, id.Name)
							return false
						}
					}
				}
			case *ast.CallExpr:
				if inLoop && lists(m) {
					walker = true
				}
			}
			return true
		})
	}
	recursive := calls(fd.Body, func(n string) bool { return n == fd.Name.Name || n == "."+fd.Name.Name })
	visit(fd.Body, recursive, "")
	return walker
}

// walksGitDir reports whether fd's Walk/WalkDir root names the git dir (directly, or through
// a variable assigned from it).
func walksGitDir(f *file, fd *ast.FuncDecl) bool {
	git := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || len(c.Args) == 0 {
			return true
		}
		if name := calleeName(c); name != "filepath.Walk" && name != "filepath.WalkDir" && name != "fs.WalkDir" {
			return true
		}
		root := string(f.src[offset(f, c.Args[0].Pos()):offset(f, c.Args[0].End())])
		if strings.Contains(root, "gitDir") || regexp.MustCompile(`\b`+regexp.QuoteMeta(root)+` :?= [^\n]*gitDir`).MatchString(src(f, fd)) {
			git = true
		}
		return true
	})
	return git
}

func isTimeParser(f *file, fd *ast.FuncDecl) bool {
	// Record times (ISO 8601 in the model's formats); flag and duration parsing is not the rule.
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || found {
			return !found
		}
		if name := calleeName(c); (name == "time.Parse" || name == "time.ParseInLocation") && len(c.Args) > 0 {
			if sel, ok := c.Args[0].(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "RFC3339") {
				return true // a --now flag or the status document's own stamp, not a record time
			}
			found = true
		}
		return true
	})
	return found
}

func isAtomicWriter(f *file, fd *ast.FuncDecl) bool {
	renames := calls(fd.Body, func(n string) bool { return n == "os.Rename" || n == ".Rename" })
	if !renames {
		return false
	}
	s := strings.ToLower(src(f, fd))
	return strings.Contains(s, "tmp") || strings.Contains(s, "temp")
}

func isTempNamer(f *file, fd *ast.FuncDecl) bool {
	s := src(f, fd)
	return calls(fd.Body, func(n string) bool { return n == "os.CreateTemp" }) ||
		strings.Contains(s, "TempPrefix +") || strings.Contains(s, "\".tmp\"") && !strings.Contains(s, "HasSuffix")
}

func isNoteJudge(f *file, fd *ast.FuncDecl) bool {
	s := src(f, fd)
	// Its own judgement: reads the mode or expiry and compares clocks, not asking JudgeNote.
	return (strings.Contains(s, "Lifecycle.Mode") || strings.Contains(s, "Lifecycle.ExpiresAt")) &&
		(strings.Contains(s, ".After(") || strings.Contains(s, ".Before(")) &&
		!calls(fd.Body, func(n string) bool {
			return strings.HasSuffix(n, "JudgeNote") || strings.HasSuffix(n, "NoteChangesAfter")
		})
}

// isSliceHelper: a function by a name the slices and maps packages answer.
func isSliceHelper(f *file, fd *ast.FuncDecl) bool {
	switch fd.Name.Name {
	case "contains", "containsString", "inList", "equal", "equalLines", "equalStrings", "sortedKeys", "keys", "indexOf":
		return fd.Recv == nil
	}
	return false
}

func isPollHelper(f *file, fd *ast.FuncDecl) bool {
	if strings.HasPrefix(fd.Name.Name, "Test") || strings.HasPrefix(fd.Name.Name, "Benchmark") {
		return false
	}
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		loop, ok := n.(*ast.ForStmt)
		if !ok || found {
			return !found
		}
		s := string(f.src[offset(f, loop.Pos()):offset(f, loop.End())])
		if strings.Contains(s, "time.Sleep(") && (strings.Contains(s, "time.Now()") || strings.Contains(s, "time.Since(") ||
			strings.Contains(s, "time.Until(") || strings.Contains(s, "deadline") || strings.Contains(s, "Deadline")) {
			found = true
		}
		return true
	})
	return found
}

// testHelpers is the scope of the test-helper rules: test files and internal/testutil.
func testHelpers(f *file) bool { return f.test || strings.HasPrefix(f.rel, "internal/testutil/") }

// helperFunc is a function of a test file that is not a test, benchmark, fuzz target or example.
func helperFunc(fd *ast.FuncDecl) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(fd.Name.Name, p) {
			return false
		}
	}
	return true
}

// isNowParser: the --now value read as a time (time.Parse of an RFC3339 layout, in a function
// that speaks of now).
func isNowParser(f *file, fd *ast.FuncDecl) bool {
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || found {
			return !found
		}
		if name := calleeName(c); (name == "time.Parse" || name == "time.ParseInLocation") && len(c.Args) > 1 {
			if sel, ok := c.Args[0].(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "RFC3339") {
				found = strings.Contains(strings.ToLower(src(f, fd)), "now")
			}
		}
		return true
	})
	return found
}

// isWorkerPool: a go statement inside a loop, and a WaitGroup waited on.
func isWorkerPool(f *file, fd *ast.FuncDecl) bool {
	inLoop := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		var body *ast.BlockStmt
		switch l := n.(type) {
		case *ast.ForStmt:
			body = l.Body
		case *ast.RangeStmt:
			body = l.Body
		default:
			return !inLoop
		}
		ast.Inspect(body, func(m ast.Node) bool {
			if _, ok := m.(*ast.GoStmt); ok {
				inLoop = true
			}
			return !inLoop
		})
		return !inLoop
	})
	return inLoop && strings.Contains(src(f, fd), "WaitGroup") && calls(fd.Body, func(n string) bool { return n == ".Wait" })
}

var trailerName = regexp.MustCompile(`(?i)trailer`)

// isTrailerParser: a function named for trailers that splits text.
func isTrailerParser(f *file, fd *ast.FuncDecl) bool {
	if !trailerName.MatchString(fd.Name.Name) {
		return false
	}
	return calls(fd.Body, func(n string) bool {
		switch n {
		case ".Split", ".SplitSeq", ".Lines", ".Cut", ".Fields", ".NewScanner", ".SplitN":
			return true
		}
		return false
	})
}

// isGitTestHelper: a test helper named for git that runs the git binary (exec.Command("git", ...)).
func isGitTestHelper(f *file, fd *ast.FuncDecl) bool {
	if !helperFunc(fd) || !strings.Contains(strings.ToLower(fd.Name.Name), "git") {
		return false
	}
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || found {
			return !found
		}
		if name := calleeName(c); name == ".Command" || name == ".CommandContext" {
			for _, a := range c.Args[:min(2, len(c.Args))] {
				if bl, ok := a.(*ast.BasicLit); ok && bl.Value == `"git"` {
					found = true
				}
			}
		}
		return true
	})
	return found
}

// isWriteFileTestHelper: a test helper named for writing (write…, mustWrite…) that takes a
// testing.TB (or *testing.T) and calls os.WriteFile.
func isWriteFileTestHelper(f *file, fd *ast.FuncDecl) bool {
	name := strings.ToLower(fd.Name.Name)
	if !helperFunc(fd) || !(strings.HasPrefix(name, "write") || strings.HasPrefix(name, "mustwrite")) ||
		!calls(fd.Body, func(n string) bool { return n == "os.WriteFile" }) {
		return false
	}
	for _, p := range fd.Type.Params.List {
		s := string(f.src[offset(f, p.Type.Pos()):offset(f, p.Type.End())])
		if s == "testing.TB" || s == "*testing.T" {
			return true
		}
	}
	return false
}

// reexports are f's top-level specs that only rename another package's name (the module's
// own or another module's; the standard library's values are values): `type X = p.Y`,
// `const X = p.Y`, `var X = p.Y` (a function value such as `var F = p.F` too).
func reexports(f *file, fset *token.FileSet) []string {
	var out []string
	// Only names of the module's own or another module's packages: `const x = time.Hour` is a
	// value, not a second spelling.
	thirdParty := map[string]bool{}
	for _, im := range f.f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil || !strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		thirdParty[name] = true
	}
	sel := func(e ast.Expr) bool {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		id, ok := s.X.(*ast.Ident)
		return ok && thirdParty[id.Name]
	}
	for _, d := range f.f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, sp := range g.Specs {
			at := fmt.Sprintf("%s:%d", f.rel, fset.Position(sp.Pos()).Line)
			switch sp := sp.(type) {
			case *ast.TypeSpec:
				if sp.Assign.IsValid() && sel(sp.Type) {
					out = append(out, at)
				}
			case *ast.ValueSpec:
				if len(sp.Values) == 1 && sel(sp.Values[0]) && sp.Type == nil {
					out = append(out, at)
				}
			}
		}
	}
	return out
}

// moduleImports are the module's own import paths that pkg's non-test files name.
func moduleImports(files []*file, pkg string) []string {
	seen := map[string]bool{}
	for _, f := range files {
		if f.pkg != pkg || f.test {
			continue
		}
		for _, im := range f.f.Imports {
			if p, err := strconv.Unquote(im.Path.Value); err == nil && strings.HasPrefix(p, modulePath+"/") {
				seen[p] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// modulePath is memd's module, whose packages the root must not import.
const modulePath = "github.com/memd-dev/memd"

// offset is p's byte offset in f's source.
func offset(f *file, p token.Pos) int { return int(p - f.f.FileStart) }

func src(f *file, fd *ast.FuncDecl) string {
	return string(f.src[offset(f, fd.Pos()):offset(f, fd.End())])
}

var all bool

func brief(at []string) string {
	if !all && len(at) > 6 {
		return strings.Join(at[:6], ", ") + fmt.Sprintf(", … (+%d)", len(at)-6)
	}
	return strings.Join(at, ", ")
}
