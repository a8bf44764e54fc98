package gitrepair

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/workpool"
	"github.com/memd-dev/memd/sync/gitstore"
)

// QuarantineDir is where bad files go, under the git dir: memd's state dir, then one folder
// per repair named for its UTC time.
var QuarantineDir = filepath.Join(memd.StateDirName, "quarantine")

// Kind is what a Problem is about.
type Kind string

// The kinds of damage Diagnose finds.
const (
	KindHead    Kind = "head"    // HEAD empty or not a ref or an id
	KindRef     Kind = "ref"     // a branch or remote-tracking ref empty, garbage, or naming a missing commit
	KindObject  Kind = "object"  // a loose object empty, truncated or corrupt
	KindPack    Kind = "pack"    // a pack or its idx truncated or corrupt
	KindMissing Kind = "missing" // an object the refs or the index need is absent
	KindIndex   Kind = "index"   // the index unreadable (bad signature, truncated)
	KindLock    Kind = "lock"    // a lock file no live git holds
)

// Problem is one thing found wrong in the git directory.
type Problem struct {
	Kind   Kind
	Path   string // relative to the git directory ("" for KindMissing)
	OID    string // the object (KindObject, KindMissing) or the id a ref names (KindRef)
	Detail string // what is wrong, in a few words
}

func (p Problem) String() string {
	switch p.Kind {
	case KindMissing:
		return fmt.Sprintf("object %s is missing", p.OID)
	case KindObject:
		return fmt.Sprintf("loose object %s is corrupt (%s)", p.OID, p.Detail)
	case KindHead:
		return "HEAD is " + p.Detail
	}
	return fmt.Sprintf("%s %s: %s", p.Kind, p.Path, p.Detail)
}

// Plan is what Repair does about p, for `memd doctor`.
func (p Problem) Plan(remote string) string {
	switch p.Kind {
	case KindHead:
		return "rewrite HEAD to name the branch"
	case KindRef:
		return "repoint it from its reflog or " + remote + "'s tracking ref (never past a commit only this machine had)"
	case KindObject, KindPack:
		return "move it aside into the quarantine (" + QuarantineDir + "), then fetch what it held from " + remote + " or rebuild it from the work tree"
	case KindMissing:
		return "fetch it from " + remote + " or rebuild it from the work tree"
	case KindIndex:
		return "move it aside and rebuild it from HEAD and the work tree's stat data (as git reset), the work tree untouched"
	case KindLock:
		return "remove it (no live git holds it)"
	}
	return ""
}

// Options say where the repo is and how it syncs.
type Options struct {
	GitDir  string // the git directory (.git)
	WorkDir string // the work tree
	Branch  string // the branch memd commits to (HEAD's when HEAD is lost)
	Remote  string // the remote's name ("origin")
	// Deep reads every loose object and pack whole and asks git for objects the refs and the
	// index need but that are absent: after an unclean stop, and when a read met damage.
	// Off, only what is cheap: HEAD, refs, the index, empty loose objects, pack trailers.
	Deep bool
	// GitEnv is added to the environment of the git commands Repair runs (credentials).
	GitEnv []string
	// Timeout bounds each talk with the remote (sync.timeout); 0: none.
	Timeout time.Duration
	Log     *slog.Logger
	Now     func() time.Time

	// common is where objects and refs live: GitDir, or a linked worktree's commondir;
	// alternates are further object folders (objects/info/alternates). Set by fill.
	common     string
	alternates []string
}

func (o *Options) fill() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Remote == "" {
		o.Remote = "origin"
	}
	if o.Branch == "" {
		o.Branch = "main"
	}
	o.common = o.GitDir
	if data, err := os.ReadFile(filepath.Join(o.GitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(data))
		if !filepath.IsAbs(c) {
			c = filepath.Join(o.GitDir, c)
		}
		o.common = filepath.Clean(c)
	}
	objects := filepath.Join(o.common, "objects")
	if data, err := os.ReadFile(filepath.Join(objects, "info", "alternates")); err == nil {
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				if !filepath.IsAbs(l) {
					l = filepath.Join(objects, l)
				}
				o.alternates = append(o.alternates, l)
			}
		}
	}
}

// base is the folder a problem's Path is relative to: the worktree's own git dir for HEAD
// and the index, the common one for objects and refs.
func (o *Options) base(p Problem) string {
	if p.Kind == KindIndex || p.Kind == KindHead || p.Path == "HEAD.lock" {
		return o.GitDir
	}
	return o.common
}

// lockMinAge: a lock younger than this may be a live non-git writer's (gitstore.ClearStaleLock).
const lockMinAge = 2 * time.Second

// Diagnose lists what is wrong in o.GitDir, in the order Repair heals it. It changes nothing.
func Diagnose(ctx context.Context, o Options) ([]Problem, error) {
	o.fill()
	if st, err := os.Stat(filepath.Join(o.common, "objects")); err != nil || !st.IsDir() {
		return nil, nil // not a git directory: nothing of ours to heal (opening it says so)
	}
	var ps []Problem
	ps = append(ps, diagnoseHead(o)...)
	packs, pps := diagnosePacks(o)
	ps = append(ps, pps...)
	ops, err := diagnoseLoose(o)
	if err != nil {
		return ps, err
	}
	ps = append(ps, ops...)
	ps = append(ps, diagnoseRefs(o, packs, bad(ps))...)
	if _, err := os.Stat(filepath.Join(o.GitDir, "index")); err == nil {
		if err := checkIndex(filepath.Join(o.GitDir, "index")); err != nil {
			ps = append(ps, Problem{Kind: KindIndex, Path: "index", Detail: errText(err)})
		}
	}
	ps = append(ps, diagnoseLocks(o)...)
	if o.Deep && len(ps) == 0 {
		missing, err := missingObjects(ctx, o)
		if err != nil {
			return ps, err
		}
		for _, m := range missing {
			ps = append(ps, Problem{Kind: KindMissing, OID: m, Detail: "needed but absent"})
		}
	}
	return ps, nil
}

// bad is the set of object ids found corrupt.
func bad(ps []Problem) map[string]bool {
	m := map[string]bool{}
	for _, p := range ps {
		if p.Kind == KindObject {
			m[p.OID] = true
		}
	}
	return m
}

func errText(err error) string {
	return strings.TrimSuffix(strings.TrimSuffix(err.Error(), errBad.Error()), ": ")
}

// diagnoseHead: HEAD must be "ref: refs/..." or an object id.
func diagnoseHead(o Options) []Problem {
	data, err := os.ReadFile(filepath.Join(o.GitDir, "HEAD"))
	s := strings.TrimSpace(string(data))
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return []Problem{{Kind: KindHead, Path: "HEAD", Detail: err.Error()}}
	case err != nil:
		return []Problem{{Kind: KindHead, Path: "HEAD", Detail: "missing"}}
	case s == "":
		return []Problem{{Kind: KindHead, Path: "HEAD", Detail: "empty"}}
	case strings.HasPrefix(s, "ref: refs/") && !strings.ContainsAny(s, "\x00\n"), isHex40(s):
		return nil
	}
	return []Problem{{Kind: KindHead, Path: "HEAD", Detail: "not a ref"}}
}

// diagnoseLoose checks every loose object file: its size (an empty file is what a power cut
// leaves most) or, deep, all of it, read with a few workers.
func diagnoseLoose(o Options) ([]Problem, error) {
	root := filepath.Join(o.common, "objects")
	dirs, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", root, err)
	}
	var oids []string
	for _, d := range dirs {
		if len(d.Name()) != 2 || !d.IsDir() || !isHex40(d.Name()+strings.Repeat("0", 38)) {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(root, d.Name()))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", d.Name(), err)
		}
		for _, e := range ents {
			if oid := d.Name() + e.Name(); isHex40(oid) { // not git's temp files (tmp_obj_*)
				oids = append(oids, oid)
			}
		}
	}
	found := make([]string, len(oids)) // what is wrong with each; "" sound
	_ = workpool.Each(len(oids), 4, func(i int) error {
		p := filepath.Join(root, oids[i][:2], oids[i][2:])
		if !o.Deep {
			if st, err := os.Lstat(p); err == nil && st.Size() == 0 {
				found[i] = "empty"
			}
			return nil
		}
		if err := checkLoose(p, oids[i], true); errors.Is(err, errBad) {
			found[i] = errText(err)
		}
		return nil
	})
	var ps []Problem
	for i, what := range found {
		if what != "" {
			ps = append(ps, Problem{Kind: KindObject, Path: "objects/" + oids[i][:2] + "/" + oids[i][2:], OID: oids[i], Detail: what})
		}
	}
	return ps, nil
}

// diagnosePacks checks each pack with an idx; it returns the idx files found sound, mapped
// (an idx grows with the history; has reads a few of its pages).
func diagnosePacks(o Options) ([]*gitstore.PackIndex, []Problem) {
	dir := filepath.Join(o.common, "objects", "pack")
	idxs, _ := filepath.Glob(filepath.Join(dir, "pack-*.idx"))
	var good []*gitstore.PackIndex
	var ps []Problem
	for _, idx := range idxs {
		pack := strings.TrimSuffix(idx, ".idx") + ".pack"
		if _, err := os.Stat(pack); err != nil {
			continue // git ignores an idx without its pack
		}
		pi, err := checkPack(pack, idx, o.Deep)
		if err != nil {
			rel, _ := filepath.Rel(o.common, pack)
			ps = append(ps, Problem{Kind: KindPack, Path: filepath.ToSlash(rel), Detail: errText(err)})
			continue
		}
		good = append(good, pi)
	}
	return good, ps
}

// has reports whether the object is in the repo and was not found corrupt.
func has(o Options, packs []*gitstore.PackIndex, corrupt map[string]bool, oid string) bool {
	if corrupt[oid] {
		return false
	}
	if _, err := os.Stat(filepath.Join(o.common, "objects", oid[:2], oid[2:])); err == nil {
		return true
	}
	h := plumbing.NewHash(oid)
	for _, idx := range packs {
		if ok, _ := idx.Contains(h); ok {
			return true
		}
	}
	for _, alt := range o.alternates { // another repo's objects: there, not checked
		if _, err := os.Stat(filepath.Join(alt, oid[:2], oid[2:])); err == nil {
			return true
		}
		idxs, _ := filepath.Glob(filepath.Join(alt, "pack", "pack-*.idx"))
		for _, p := range idxs {
			if idx, err := gitstore.OpenPackIndex(p); err == nil {
				if ok, _ := idx.Contains(h); ok {
					return true
				}
			}
		}
	}
	return false
}

// refs lists the loose and packed refs under refs/heads and refs/remotes with their content.
func refs(gitDir string) map[string]string {
	out := map[string]string{}
	if f, err := os.Open(filepath.Join(gitDir, "packed-refs")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			id, name, ok := strings.Cut(sc.Text(), " ")
			if ok && (strings.HasPrefix(name, "refs/heads/") || strings.HasPrefix(name, "refs/remotes/")) {
				out[name] = id
			}
		}
		f.Close()
	}
	for _, p := range refFiles(gitDir) {
		rel, _ := filepath.Rel(gitDir, p)
		rel = filepath.ToSlash(rel)
		if (strings.HasPrefix(rel, "refs/heads/") || strings.HasPrefix(rel, "refs/remotes/")) && !strings.HasSuffix(rel, ".lock") {
			data, _ := os.ReadFile(p)
			out[rel] = strings.TrimSpace(string(data))
		}
	}
	return out
}

// refFiles are the files under gitDir/refs (loose refs and their locks): the one walk of
// the git dir here.
func refFiles(gitDir string) []string {
	var out []string
	_ = filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// diagnoseRefs: each branch and remote-tracking ref must name an object the repo has.
func diagnoseRefs(o Options, packs []*gitstore.PackIndex, corrupt map[string]bool) []Problem {
	var ps []Problem
	all := refs(o.common)
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		id := all[name]
		switch {
		case strings.HasPrefix(id, "ref: "):
		case !isHex40(id):
			ps = append(ps, Problem{Kind: KindRef, Path: name, Detail: "not an object id"})
		case !has(o, packs, corrupt, id):
			// A git gc may have packed it since the packs were listed: list them again.
			if packs, _ = diagnosePacks(o); !has(o, packs, corrupt, id) {
				ps = append(ps, Problem{Kind: KindRef, Path: name, OID: id, Detail: "names missing commit " + id[:12]})
			}
		}
	}
	return ps
}

// diagnoseLocks lists lock files git left that no live git holds.
func diagnoseLocks(o Options) []Problem {
	var locks []string
	// index.lock is not here: memd's own index refresh holds it for seconds at 100k files,
	// and Open's index upkeep already clears a stale one the way that knows (§9.5).
	locks = append(locks, filepath.Join(o.GitDir, "HEAD.lock"))
	for _, n := range []string{"packed-refs.lock", "config.lock"} {
		locks = append(locks, filepath.Join(o.common, n))
	}
	for _, p := range refFiles(o.common) {
		if strings.HasSuffix(p, ".lock") {
			locks = append(locks, p)
		}
	}
	live, canSee := gitstore.LiveGitProcess(o.WorkDir)
	var ps []Problem
	for _, l := range locks {
		st, err := os.Lstat(l)
		if err != nil || live || !canSee || o.Now().Sub(st.ModTime()) < lockMinAge {
			continue
		}
		base := o.common
		if filepath.Base(l) == "HEAD.lock" {
			base = o.GitDir
		}
		rel, _ := filepath.Rel(base, l)
		ps = append(ps, Problem{Kind: KindLock, Path: filepath.ToSlash(rel), Detail: "left by a git that is gone"})
	}
	return ps
}
