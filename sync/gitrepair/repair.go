package gitrepair

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/sync/gitstore"
)

// ErrLost: something only this machine had is gone (a commit, or an object of one, that the
// remote never received) and cannot be healed; the error's text says what is lost and what
// is kept. memd stops with state error on it.
var ErrLost = errors.New("lost")

// ErrNotHealed: damage remains that a later try may heal (the remote unreachable now).
var ErrNotHealed = errors.New("not healed yet")

// Report is what Repair did.
type Report struct {
	Quarantine string   // where bad files were moved ("" when none was)
	Done       []string // one line per repair made
}

// repair is one Repair's working state.
type repair struct {
	o       Options
	ctx     context.Context
	rep     Report
	pending map[string]string // ref → the commit it must name, once that is fetched
	noIndex bool              // the index was moved aside: rebuild it at the end
}

// Repair heals ps (from Diagnose) in this order: locks, bad files moved aside, HEAD, refs
// that can be repointed at once, missing objects (rebuilt from the work tree, else fetched
// from the remote), the refs waiting for a fetched commit, the index. The work tree is never
// written. ErrLost names what cannot be healed; ErrNotHealed what may heal later.
func Repair(ctx context.Context, o Options, ps []Problem) (Report, error) {
	o.fill()
	r := &repair{o: o, ctx: ctx, pending: map[string]string{}}
	if len(ps) == 0 {
		return r.rep, nil
	}
	for _, p := range ps {
		if err := r.first(p); err != nil {
			return r.rep, err
		}
	}
	for _, p := range ps {
		if p.Kind == KindRef {
			if err := r.ref(p); err != nil {
				return r.rep, err
			}
		}
	}
	err := r.fill()
	if err == nil {
		err = r.finishRefs()
	}
	if err != nil {
		r.restoreRefs() // as they were: the next look finds them again, never an unborn branch
	}
	if err == nil && r.noIndex {
		err = r.rebuildIndex()
	}
	if serr := SyncTree(r.o.GitDir); serr != nil && err == nil {
		err = serr
	}
	if r.o.common != r.o.GitDir {
		if serr := SyncTree(filepath.Join(r.o.common, "refs")); serr != nil && err == nil {
			err = serr
		}
		if serr := SyncTree(filepath.Join(r.o.common, "objects")); serr != nil && err == nil {
			err = serr
		}
	}
	return r.rep, err
}

// first handles what needs no object: locks, quarantine, HEAD.
func (r *repair) first(p Problem) error {
	switch p.Kind {
	case KindLock:
		if err := gitstore.ClearStaleLock(filepath.Join(r.o.base(p), p.Path), r.o.WorkDir, 0, lockMinAge, r.o.Log); err != nil {
			return err
		}
		r.done("removed stale lock %s", p.Path)
	case KindObject:
		if err := r.quarantine(r.o.common, p.Path); err != nil {
			return err
		}
		r.done("moved corrupt object %s aside (%s)", short(p.OID), p.Detail)
	case KindPack:
		base := strings.TrimSuffix(p.Path, ".pack")
		for _, ext := range []string{".pack", ".idx", ".rev", ".bitmap", ".keep", ".promisor", ".mtimes"} {
			if err := r.quarantine(r.o.common, base+ext); err != nil {
				return err
			}
		}
		r.done("moved corrupt pack %s aside (%s)", filepath.Base(p.Path), p.Detail)
	case KindIndex:
		if err := r.quarantine(r.o.GitDir, p.Path); err != nil {
			return err
		}
		r.noIndex = true
	case KindHead:
		if err := r.writeFile(r.o.GitDir, "HEAD", "ref: refs/heads/"+r.o.Branch+"\n"); err != nil {
			return err
		}
		r.done("HEAD was %s: now refs/heads/%s", p.Detail, r.o.Branch)
	}
	return nil
}

func short(oid string) string {
	if len(oid) > 12 {
		return oid[:12]
	}
	return oid
}

func (r *repair) done(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.rep.Done = append(r.rep.Done, line)
	r.o.Log.Warn("git repair: " + line)
}

// quarantine moves rel (under base: the git dir or the common one) into this repair's
// quarantine folder; a name that is not there is skipped.
func (r *repair) quarantine(base, rel string) error {
	src := filepath.Join(base, filepath.FromSlash(rel))
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if r.rep.Quarantine == "" {
		base := filepath.Join(r.o.GitDir, QuarantineDir, r.o.Now().UTC().Format("20060102T150405Z"))
		q := base
		for i := 2; ; i++ {
			if _, err := os.Lstat(q); errors.Is(err, fs.ErrNotExist) {
				break
			}
			q = fmt.Sprintf("%s-%d", base, i)
		}
		r.rep.Quarantine = q
	}
	dst := filepath.Join(r.rep.Quarantine, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("quarantine %s: %w", rel, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("quarantine %s: %w", rel, err)
	}
	return nil
}

// writeFile replaces rel (under base: the git dir or the common one) atomically and durably.
func (r *repair) writeFile(base, rel, content string) error {
	t, err := safefs.Open(base)
	if err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	defer t.Close()
	if err := t.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	if err := t.WriteFileAtomic(rel, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// reflogTip is the id the newest line of rel's reflog moved it to ("" without one).
func reflogTip(gitDir, rel string) string {
	f, err := os.Open(filepath.Join(gitDir, "logs", filepath.FromSlash(rel)))
	if err != nil {
		return ""
	}
	defer f.Close()
	tip := ""
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && isHex40(f[1]) {
			tip = f[1]
		}
	}
	return tip
}

// ref repoints a broken ref at once when what it must name is here; otherwise it moves it
// aside (so git can run) and waits for the fetch.
func (r *repair) ref(p Problem) error {
	want, from := reflogTip(r.o.common, p.Path), "its reflog"
	if want == "" && isHex40(p.OID) {
		want, from = p.OID, "itself"
	}
	if want == "" && strings.HasPrefix(p.Path, "refs/heads/") {
		tr := "refs/remotes/" + r.o.Remote + "/" + strings.TrimPrefix(p.Path, "refs/heads/")
		if id := refs(r.o.common)[tr]; isHex40(id) {
			want, from = id, tr+" (no reflog: commits made here after it, if any, are not known)"
		}
	}
	packs, _ := diagnosePacks(r.o)
	if want != "" && has(r.o, packs, nil, want) {
		if err := r.writeFile(r.o.common, p.Path, want+"\n"); err != nil {
			return err
		}
		r.done("%s was %s: now %s, from %s", p.Path, p.Detail, short(want), from)
		return nil
	}
	branch := strings.HasPrefix(p.Path, "refs/heads/")
	if want == "" && branch {
		return fmt.Errorf("%s is %s and has no reflog and no tracking ref to repoint it from; lost: where the branch was; kept: the work tree and the ref as they are: %w", p.Path, p.Detail, ErrLost)
	}
	if err := r.quarantine(r.o.common, p.Path); err != nil {
		return err
	}
	if branch {
		r.pending[p.Path] = want
	} else {
		r.done("moved broken %s aside (the next fetch writes it again)", p.Path)
	}
	return nil
}

// finishRefs writes the refs whose commit the fetch brought; one that did not come is lost.
func (r *repair) finishRefs() error {
	packs, _ := diagnosePacks(r.o)
	for ref, want := range r.pending {
		if !has(r.o, packs, nil, want) {
			return fmt.Errorf("%s's commit %s was made on this machine only and is gone (%s does not have it); "+
				"lost: that commit's history; kept: the work tree as it is, the ref as it was, the bad files in %s; "+
				"to go on, point %s at an earlier commit (git reflog %s) and memd commits the work tree again: %w",
				ref, short(want), r.o.Remote, r.rep.Quarantine, ref, strings.TrimPrefix(ref, "refs/heads/"), ErrLost)
		}
		if err := r.writeFile(r.o.common, ref, want+"\n"); err != nil {
			return err
		}
		r.done("%s now %s again, fetched from %s", ref, short(want), r.o.Remote)
	}
	return nil
}

// restoreRefs moves the refs still waiting for their commit back from the quarantine.
func (r *repair) restoreRefs() {
	for ref := range r.pending {
		src := filepath.Join(r.rep.Quarantine, filepath.FromSlash(ref))
		dst := filepath.Join(r.o.common, filepath.FromSlash(ref))
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if err := os.Rename(src, dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.o.Log.Warn("git repair: put the ref back", "ref", ref, "err", err)
		}
	}
}
