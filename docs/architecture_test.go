// Package docs_test keeps docs/ true to the code: the layout table of ARCHITECTURE.md §1
// against the packages' real imports, and every "docs/X.md §N" a comment or doc cites against
// the headings that exist.
package docs_test

import (
	"bufio"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/memd-dev/memd"

// root is the module's root directory (this file is in docs/).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// row is one line of the §1 table: the packages it names and what they may import of memd's
// own packages (nil when the row does not say: "everything", "—").
type row struct {
	line    int
	pkgs    []string // module-relative dirs; "." is the root
	imports []string // module-relative dirs, sorted; nil = unchecked
}

var tick = regexp.MustCompile("`([^`]+)`")

// cellPackages reads a cell's backticked package dirs; "root" (or `memd`) is the root.
func cellPackages(cell string) []string {
	var out []string
	for _, m := range tick.FindAllStringSubmatch(cell, -1) {
		p := strings.TrimSuffix(strings.TrimSpace(m[1]), "/")
		if p == "memd" {
			p = "."
		}
		out = append(out, p)
	}
	if regexp.MustCompile(`(^|[ ,(])root([ ,)]|$)`).MatchString(cell) {
		out = append(out, ".")
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// layoutTable parses ARCHITECTURE.md §1's table.
func layoutTable(t *testing.T, path string) []row {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []row
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## 1. "):
			in = true
			continue
		case strings.HasPrefix(line, "## "):
			in = false
		}
		if !in || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| package") || strings.HasPrefix(line, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 3 {
			t.Fatalf("%s:%d: a layout row has package | owns | may import: %q", path, n, line)
		}
		r := row{line: n, pkgs: cellPackages(cells[0])}
		may := strings.TrimSpace(cells[2])
		switch {
		case may == "—" || strings.HasPrefix(may, "everything"):
		default:
			r.imports = cellPackages(may)
			if r.imports == nil {
				r.imports = []string{}
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no layout table under \"## 1. \"", path)
	}
	return rows
}

// modulePackages are the module's package dirs with their imports of the module (non-test
// files, this platform's build), and whether the package has only tests.
func modulePackages(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if p != dir && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		bp, err := build.ImportDir(p, 0)
		if err != nil || len(bp.GoFiles) == 0 {
			return nil // no Go, or tests only (e2e/, reliability/, docs/): nothing to import from
		}
		rel, _ := filepath.Rel(dir, p)
		var mine []string
		for _, im := range bp.Imports {
			if im == module {
				mine = append(mine, ".")
			} else if after, ok := strings.CutPrefix(im, module+"/"); ok {
				mine = append(mine, after)
			}
		}
		slices.Sort(mine)
		if mine == nil {
			mine = []string{}
		}
		out[filepath.ToSlash(rel)] = mine
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLayoutTableMatchesImports: every package of the module has a row in ARCHITECTURE.md §1
// (bench/ and scripts/ programs by their folder), and a row's "may import" is exactly what its
// packages import of memd (a row may name several packages: their imports together).
func TestLayoutTableMatchesImports(t *testing.T) {
	dir := root(t)
	doc := filepath.Join(dir, "docs", "ARCHITECTURE.md")
	rows := layoutTable(t, doc)
	pkgs := modulePackages(t, dir)
	rowOf := map[string]row{}
	for _, r := range rows {
		for _, p := range r.pkgs {
			rowOf[p] = r
		}
	}
	// Programs under bench/ and scripts/ are listed by their folder; every other package by
	// its own dir.
	covering := func(p string) (row, bool) {
		if top, _, ok := strings.Cut(p, "/"); ok && (top == "bench" || top == "scripts") {
			p = top
		}
		r, ok := rowOf[p]
		return r, ok
	}
	union := map[int][]string{}
	for p, imports := range pkgs {
		r, ok := covering(p)
		if !ok {
			t.Errorf("package %s has no row in docs/ARCHITECTURE.md §1", p)
			continue
		}
		union[r.line] = append(union[r.line], imports...)
	}
	for _, r := range rows {
		if r.imports == nil {
			continue
		}
		got := union[r.line]
		slices.Sort(got)
		got = slices.Compact(got)
		// A row's packages importing each other is not an import of another row.
		got = slices.DeleteFunc(got, func(p string) bool { return slices.Contains(r.pkgs, p) })
		want := slices.DeleteFunc(slices.Clone(r.imports), func(p string) bool { return slices.Contains(r.pkgs, p) })
		if !slices.Equal(got, want) {
			t.Errorf("docs/ARCHITECTURE.md:%d %v may import %v, but they import %v", r.line, r.pkgs, want, got)
		}
	}
	for p := range rowOf {
		if _, ok := pkgs[p]; !ok {
			if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
				t.Errorf("docs/ARCHITECTURE.md §1 names %s, which is not in the tree", p)
			}
		}
	}
}

// A citation of another repository's docs ("memhtml:docs/format.md") is not one of ours.
var cite = regexp.MustCompile(`(?:^|[^:/\w])docs/([A-Za-z_]+\.md)(?: (?:§|and §)([0-9]+(?:\.[0-9]+)*))?`)

// TestCitedDocsExist: every "docs/X.md" and "docs/X.md §N" in the code's comments, the README
// and docs/ names a file that exists and a section it has; and no comment cites a design
// document that is not in the repository ("DESIGN §N").
func TestCitedDocsExist(t *testing.T) {
	dir := root(t)
	sections := map[string]map[string]bool{}
	heading := regexp.MustCompile(`^#{2,4} ([0-9]+(?:\.[0-9]+)*)\.? `)
	secs := func(name string) map[string]bool {
		if s, ok := sections[name]; ok {
			return s
		}
		b, err := os.ReadFile(filepath.Join(dir, "docs", name))
		if err != nil {
			sections[name] = nil
			return nil
		}
		s := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if m := heading.FindStringSubmatch(l); m != nil {
				s[m[1]] = true
			}
		}
		sections[name] = s
		return s
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".go" && ext != ".md" && ext != ".sh" {
			return nil
		}
		if strings.HasSuffix(p, "architecture_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		for i, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "DESIGN §") {
				t.Errorf("%s:%d cites DESIGN §, which is not in the repository (cite docs/ARCHITECTURE.md): %s", rel, i+1, strings.TrimSpace(l))
			}
			for _, m := range cite.FindAllStringSubmatch(l, -1) {
				s := secs(m[1])
				switch {
				case s == nil:
					t.Errorf("%s:%d cites docs/%s, which does not exist", rel, i+1, m[1])
				case m[2] != "" && !s[m[2]]:
					t.Errorf("%s:%d cites docs/%s §%s, which has no such section", rel, i+1, m[1], m[2])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var goPath = regexp.MustCompile(`(?:^|[^\w./:-])((?:[a-z0-9_]+/)+[a-z0-9_]+\.go)\b`)

// TestCitedFilesExist: a source file a comment or doc names by path ("sync/gitrepo/checkout.go")
// is there: from the module root, or from the citing file's package or its parent
// ("gitstore/objwrite.go" from sync/). A line that says the file was removed or retired is
// history, not a citation; housetable's fixtures are made-up trees.
func TestCitedFilesExist(t *testing.T) {
	dir := root(t)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".go" && ext != ".md" && ext != ".sh" || strings.HasPrefix(rel, "scripts/housetable/") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pkg := filepath.Dir(p)
		for i, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "removed") || strings.Contains(l, "retired") {
				continue
			}
			for _, m := range goPath.FindAllStringSubmatch(l, -1) {
				found := false
				for _, base := range []string{dir, pkg, filepath.Dir(pkg)} {
					if _, err := os.Stat(filepath.Join(base, filepath.FromSlash(m[1]))); err == nil {
						found = true
					}
				}
				if !found {
					t.Errorf("%s:%d names %s, which is not in the tree", rel, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
