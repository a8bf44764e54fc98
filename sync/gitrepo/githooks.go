package gitrepo

import (
	"github.com/memd-dev/memd/internal/gitconfig"

	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/sync/githooks"
	"github.com/memd-dev/memd/sync/gitstore"
)

// The repo's own git hooks around memd's commits, pushes and merges (docs/ARCHITECTURE.md
// §10, sync/githooks runs them): this file decides when, as `git commit`, `git push` and
// `git pull` do, and holds the paths a pre-commit or commit-msg hook refuses.

// HookHeld is a path a pre-commit, prepare-commit-msg or commit-msg hook refused: not
// committed while the work tree keeps the version refused; any change tries it again.
type HookHeld struct {
	Path string
	Hook string // the hook that refused
	Line string // its last stderr line, escaped (textsafe)
	work plumbing.Hash
	mode filemode.FileMode
	del  bool
}

// GitHooks is a runner of this repo's git hooks: core.hooksPath read again whenever a git
// config file changes (gitconfig.Stamp). verify false is --no-verify; tokenEnv is
// sync.token_env, kept out of every hook's environment.
func (r *Repo) GitHooks(verify bool, tokenEnv string) *githooks.Runner {
	return githooks.New(r.dir, r.gitDir, verify, tokenEnv, func() string { return gitconfig.Stamp(r.layout) })
}

// SetGitHooks installs h (nil: no hook runs) for the commits, pushes and merges from now on.
func (r *Repo) SetGitHooks(h *githooks.Runner) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gitHooks = h
}

// HookHeldFiles lists the paths the commit hooks hold now, by path; one gone from the work
// tree since is dropped.
func (r *Repo) HookHeldFiles() []HookHeld {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]HookHeld, 0, len(r.hookHeld))
	for p, h := range r.hookHeld {
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); os.IsNotExist(err) && !h.del {
			delete(r.hookHeld, p)
			continue
		}
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// keepHookHeld drops from the commit the paths a hook refused at the version staged now;
// a path staged at another version leaves the list (tried again).
func (s *stager) keepHookHeld() {
	for p, h := range s.r.hookHeld {
		e, ok := s.edits[p]
		if !ok {
			continue
		}
		if e.del == h.del && e.hash == h.work && e.mode == h.mode {
			delete(s.edits, p)
			continue
		}
		delete(s.r.hookHeld, p)
	}
}

// commitHooks runs the hooks before a commit of s.edits on baseTree (message "" = memd's
// change message for the paths tried). A refusal is narrowed to the paths refused by
// trying halves (each try a tree and a run of the hooks, no commit), which are held; the
// rest is tried once more. It returns the tree and message to commit (tree == baseTree:
// nothing left).
func (s *stager) commitHooks(baseTree plumbing.Hash, message string) (plumbing.Hash, string, error) {
	paths := s.editPaths()
	tree, msg, err := s.hookTrial(baseTree, paths, message)
	var rf *githooks.Refusal
	if !errors.As(err, &rf) {
		return tree, msg, err
	}
	refused := map[string]*githooks.Refusal{}
	if err := s.findRefused(baseTree, paths, message, rf, refused); err != nil {
		return plumbing.ZeroHash, "", err
	}
	s.holdRefused(refused)
	if len(s.edits) == 0 {
		return baseTree, "", nil
	}
	rest := s.editPaths()
	tree, msg, err = s.hookTrial(baseTree, rest, message)
	if errors.As(err, &rf) { // refused only as a whole: every path of it is held
		all := map[string]*githooks.Refusal{}
		for _, p := range rest {
			all[p] = rf
		}
		s.holdRefused(all)
		return baseTree, "", nil
	}
	return tree, msg, err
}

// findRefused narrows a refusal of paths (ref) to the paths refused, into out. Halves
// that pass alone while the whole was refused hold the whole: the hook refuses them only
// together.
func (s *stager) findRefused(baseTree plumbing.Hash, paths []string, message string, ref *githooks.Refusal, out map[string]*githooks.Refusal) error {
	if len(paths) == 1 {
		out[paths[0]] = ref
		return nil
	}
	half := len(paths) / 2
	any := false
	for _, part := range [][]string{paths[:half], paths[half:]} {
		_, _, err := s.hookTrial(baseTree, part, message)
		var rf *githooks.Refusal
		switch {
		case errors.As(err, &rf):
			any = true
			if err := s.findRefused(baseTree, part, message, rf, out); err != nil {
				return err
			}
		case err != nil:
			return err
		}
	}
	if !any {
		for _, p := range paths {
			out[p] = ref
		}
	}
	return nil
}

// holdRefused takes the refused paths out of the commit and into r.hookHeld.
func (s *stager) holdRefused(refused map[string]*githooks.Refusal) {
	if s.r.hookHeld == nil {
		s.r.hookHeld = map[string]HookHeld{}
	}
	for p, rf := range refused {
		e := s.edits[p]
		s.r.hookHeld[p] = HookHeld{Path: p, Hook: rf.Hook, Line: rf.Line, work: e.hash, mode: e.mode, del: e.del}
		delete(s.edits, p)
		s.r.log.Warn("git hook refused the path; held, not committed", "path", p, "hook", rf.Hook, "said", rf.Line)
	}
}

func (s *stager) editPaths() []string {
	paths := make([]string, 0, len(s.edits))
	for p := range s.edits {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// hookTrial builds the tree of baseTree with the edits of paths, makes its objects visible
// to git (the hooks read them) and runs the hooks before a commit of it.
func (s *stager) hookTrial(baseTree plumbing.Hash, paths []string, message string) (plumbing.Hash, string, error) {
	sub := make(map[string]edit, len(paths))
	var changes []memd.Change
	for _, p := range paths {
		sub[p] = s.edits[p]
		changes = append(changes, memd.Change{Path: p, Op: s.edits[p].op})
	}
	s.written = map[string]hotTree{} // the last trial's trees are the commit's (keepHot)
	tree, _, err := s.rebuild(baseTree, buildTrie(sub), "")
	if err == nil && tree.IsZero() {
		tree, err = s.objs.Write(plumbing.TreeObject, nil)
	}
	if err == nil {
		err = s.objs.Flush()
	}
	if err != nil {
		return plumbing.ZeroHash, "", err
	}
	if message == "" {
		message = ChangeMessage(changes, s.r.opts.Hostname)
	}
	msg, err := s.r.gitHooks.BeforeCommit(context.Background(), githooks.Commit{Message: message,
		WriteIndex: func(w io.Writer) error { return s.writeTreeIndex(w, tree) }, Env: s.r.hookAuthorEnv()})
	return tree, msg, err
}

// writeTreeIndex writes an index holding exactly tree's entries (no stat data: git
// compares by content).
func (s *stager) writeTreeIndex(w io.Writer, tree plumbing.Hash) error {
	var entries []*index.Entry
	err := s.walkTree(tree, "", func(p string, e object.TreeEntry) error {
		entries = append(entries, &index.Entry{Name: p, Mode: e.Mode, Hash: e.Hash})
		return nil
	})
	if err != nil {
		return fmt.Errorf("index of tree %s: %w", tree, err)
	}
	return gitstore.WriteIndex(w, entries)
}

// hookAuthorEnv is what git sets for the commit hooks beside GIT_INDEX_FILE.
func (r *Repo) hookAuthorEnv() []string {
	now := r.opts.Now()
	return []string{"GIT_AUTHOR_NAME=" + sanitizeIdent(r.author.Name), "GIT_AUTHOR_EMAIL=" + sanitizeIdent(r.author.Email),
		"GIT_AUTHOR_DATE=@" + fmt.Sprint(now.Unix()) + " " + now.Format("-0700")}
}

// afterCommitHooks runs post-commit once the branch names the new commit.
func (r *Repo) afterCommitHooks() {
	if err := r.gitHooks.AfterCommit(context.Background(), r.hookAuthorEnv()); err != nil {
		r.log.Warn("git post-commit hook failed (ignored, as git ignores it)", "err", err)
	}
}

// afterMergeHooks runs post-merge after a sync's merge or fast-forward changed the work
// tree, as `git pull` does.
func (r *Repo) afterMergeHooks(ctx context.Context) {
	r.mu.Lock()
	h := r.gitHooks
	r.mu.Unlock()
	if err := h.AfterMerge(ctx); err != nil {
		r.log.Warn("git post-merge hook failed (ignored, as git ignores it)", "err", err)
	}
}

// prePushHook runs pre-push before a push of local to the branch (remote side expect,
// as the round's fetch saw it) of the remote ro.Remote at url. Caller holds r.mu.
func (r *Repo) prePushHook(ctx context.Context, remote, url string, local, expect plumbing.Hash) error {
	ref := r.BranchRef().String()
	rid := ""
	if !expect.IsZero() {
		rid = expect.String()
	}
	err := r.gitHooks.BeforePush(ctx, remote, url, []githooks.PushRef{{LocalRef: ref, LocalID: local.String(), RemoteRef: ref, RemoteID: rid}})
	if err != nil {
		return fmt.Errorf("push %s: %w", remote, err)
	}
	return nil
}
