package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func init() {
	register("conflicts", "list the conflict copies in the tree (path, copy, machine, time, blob ids)", cmdConflicts)
}

// cmdConflicts lists conflict copies from the work tree: it reads files only, never takes the
// writer lock, so it answers while `memd run` works.
func cmdConflicts(a *app, args []string) int {
	fs := a.flags("conflicts", "")
	asJSON := fs.Bool("json", false, "print them as JSON (the status document's conflicts)")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "memd: conflicts: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	ign, err := repofiles.New(a.cfg.Repo, a.cfg.Watch.Ignore)
	if err != nil {
		return a.fail("conflicts: %s", textsafe.Escape(err.Error()))
	}
	list, err := gitrepo.ListConflicts(a.cfg.Repo, ign.Ignored)
	if err != nil {
		return a.fail("conflicts: %s", textsafe.Escape(err.Error()))
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(list); err != nil {
			return a.fail("conflicts: %s", textsafe.Escape(err.Error()))
		}
		return exitOK
	}
	if len(list) == 0 {
		fmt.Fprintln(a.stdout, "no conflict copies")
		return exitOK
	}
	for _, c := range list {
		at := "?"
		if !c.At.IsZero() {
			at = localTime(c.At)
		}
		fmt.Fprintf(a.stdout, "%s\n  copy    %s\n  from    %s at %s\n  ours    %s (the copy)\n  theirs  %s\n",
			textsafe.Escape(c.Path), textsafe.Escape(c.Copy), textsafe.Escape(c.Machine), at, shortBlob(c.Ours), shortBlob(c.Theirs))
	}
	fmt.Fprintf(a.stdout, "\nend one with: memd resolve PATH --keep ours|theirs|both\n")
	return exitOK
}

func shortBlob(h string) string {
	switch {
	case h == "":
		return "(gone)"
	case len(h) > 12:
		return h[:12]
	}
	return h
}

// repoRel turns a PATH argument into a repo-relative slash path: absolute under the repo, or
// relative to the working directory when that is inside the repo, else taken as repo-relative.
func (a *app) repoRel(p string) (string, error) {
	root := a.cfg.Repo
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	abs := p
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err == nil {
			if real, err := filepath.EvalSymlinks(wd); err == nil {
				wd = real
			}
		}
		if err != nil || !inside(root, wd) {
			return filepath.ToSlash(filepath.Clean(p)), checkRel(p)
		}
		abs = filepath.Join(wd, p)
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
		abs = filepath.Join(dir, filepath.Base(p))
	}
	if !inside(root, abs) {
		return "", fmt.Errorf("%s is outside the memory repo %s", textsafe.Escape(p), root)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), checkRel(rel)
}

func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

func checkRel(rel string) error {
	c := filepath.ToSlash(filepath.Clean(rel))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || c == ".git" || strings.HasPrefix(c, ".git/") {
		return fmt.Errorf("%q names no memory in the repo", textsafe.Escape(rel))
	}
	return nil
}

// localTime is how commands print a time: the user's zone, to the minute.
func localTime(t time.Time) string { return t.Local().Format("2006-01-02 15:04") }
