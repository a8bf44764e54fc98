package gitrepo

// A push to a file remote (a bare repository on this machine, owned by this user) writes
// the few objects it carries into the remote's object store and moves the remote's branch
// itself, with git's lock protocol, instead of running the remote's `git receive-pack`,
// which runs `git unpack-objects` (or index-pack) and a `git rev-list` connectivity check:
// three processes, the time between receive-pack's advertisement and its ref update in
// which every other machine's push loses (in the ten-machine swarm a push took 0.6–3 s
// while the machines raced, and the lost ones had to fetch, merge and push again).
//
// It is receive-pack's work, done the same way, for the case receive-pack has nothing of
// its own to add, and only then (anything else is pushed through git as before):
//   - the remote is bare, this user's, not shallow, and its effective config (`git config
//     --list` in it: its own, the user's, the system's) has nothing receive-pack would act
//     on: no receive.* key, no transfer.fsckObjects, core.hooksPath, core.sharedRepository,
//     core.logAllRefUpdates, extensions; no executable receive-side hook in hooks/, and no
//     reflog for the branch;
//   - the push is a fast-forward of the remote head this round fetched (the tracking ref),
//     of at most maxCopyObjects objects and maxCopyBytes (none over maxCopyObject);
//   - the remote has at most twice its gc.autoPackLimit (50) packs. Past the limit, or past
//     gc.auto's loose objects by git's estimate, its gc is due: git's push runs `git gc
//     --auto` after it (receive.autogc), and so does this one, started and not waited for, at
//     most every autoGCSpacing.
//
// The objects are the ones git's push would send (gitremote.PushObjects: the new commits
// and their tree entries the remote head's trees lack), each read whole from this
// repository and checked against its name (gitstore.ReadBounded), and written as
// receive-pack keeps a push, loose objects below transfer.unpackLimit (100) and a pack from
// there, durable before the ref names them (writeFileRemoteObjects). The branch moves from
// the fetched head to the new one under "<ref>.lock", created exclusively as git creates it,
// so this interlocks with a git push, a person's git and the other machines' memd: a branch
// that moved, or a lock another holds, is a lost race (ErrPushRejected; the next round
// merges again). The objects of a lost race stay, named by no ref, until the remote's gc
// prunes them. A lock older than refLockStaleAge is left for git to report.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
)

// directFilePushes turns the direct push on; tests of receive-pack's path turn it off.
var directFilePushes = true

// errPushDeclined: this push is not one the direct push takes (see the file comment); git's
// receive-pack takes it.
var errPushDeclined = errors.New("not pushed into the file remote directly")

// errRemoteMovedDirect: the remote branch moved, or was being moved, by another push between
// this round's fetch and the ref update; wrapped with ErrPushRejected.
var errRemoteMovedDirect = errors.New("the remote branch moved meanwhile")

// receiveHooks are the hooks receive-pack runs; any of them executable sends a push
// through git.
var receiveHooks = []string{"pre-receive", "update", "post-receive", "post-update",
	"reference-transaction", "proc-receive", "push-to-checkout"}

const (
	// defaultAutoPackLimit, defaultGCAuto and unpackLimit are git's gc.autoPackLimit,
	// gc.auto and transfer.unpackLimit.
	defaultAutoPackLimit = 50
	defaultGCAuto        = 6700
	unpackLimit          = 100
	// autoGCSpacing spaces the `git gc --auto` runs of one repo: one that starts a gc in
	// the background returns at once, and the pushes until it is done would start more.
	autoGCSpacing = 10 * time.Second
	// filePushRecheck bounds how long a verdict on a remote's config stands when none of
	// the files it was read from changed (an included file may have).
	filePushRecheck = time.Minute
)

// filePushVerdict is the last look at a file remote's config and hooks (under r.mu).
type filePushVerdict struct {
	dir, sig string
	at       time.Time
	why      string // "" = the direct push may take it
	limit    int    // gc.autoPackLimit
	gcAuto   int    // gc.auto
	autoGC   bool   // gc --auto would run there (gc.auto and the limit not 0)
	lastGC   time.Time
}

// pushToFileRemoteLocked pushes local into the file remote whose git directory is gitDir,
// moving its branch from expect (the tracking ref this round's fetch left). errPushDeclined
// when it is not the direct push's to take. Caller holds r.mu.
func (r *Repo) pushToFileRemoteLocked(ctx context.Context, gitDir string, expect, local plumbing.Hash) error {
	if !directFilePushes {
		return errPushDeclined
	}
	src, ok := r.repo.Storer.(*gitstore.Storage)
	if !ok || expect.IsZero() || src.HasEncodedObject(expect) != nil {
		return fmt.Errorf("%w: no remote head to stand on", errPushDeclined)
	}
	if !ownedByMe(gitDir) {
		return fmt.Errorf("%w: not this user's", errPushDeclined)
	}
	v := r.filePushVerdictLocked(ctx, gitDir)
	if v.why != "" {
		return fmt.Errorf("%w: %s", errPushDeclined, v.why)
	}
	ref := r.BranchRef().String()
	path := filepath.Join(gitDir, filepath.FromSlash(ref))
	if b, err := os.ReadFile(path); err == nil && strings.HasPrefix(string(b), "ref:") {
		return fmt.Errorf("%w: %s is a symbolic ref", errPushDeclined, ref)
	}
	if _, err := os.Lstat(filepath.Join(gitDir, "logs", filepath.FromSlash(ref))); err == nil {
		return fmt.Errorf("%w: %s has a reflog", errPushDeclined, ref)
	}
	packs := countPacks(gitDir)
	if packs > 2*v.limit {
		return fmt.Errorf("%w: %d packs, its gc is due", errPushDeclined, packs)
	}
	st := gitremote.PushStats{Old: expect, New: local, Direct: true}
	objs, ff, err := gitremote.PushObjects(src, local, expect, r.testPushWalkLimit, &st)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", errPushDeclined, err)
	case !ff:
		return fmt.Errorf("%w: not a fast-forward of %s", errPushDeclined, expect.String()[:12])
	case len(objs) > maxCopyObjects:
		return fmt.Errorf("%w: %d objects", errPushDeclined, len(objs))
	}
	if err := writeFileRemoteObjects(src, gitDir, objs); err != nil {
		return fmt.Errorf("%w: %w", errPushDeclined, err)
	}
	st.Objects, st.Sent = len(objs), objs
	if err := r.moveFileRemoteRef(gitDir, path, expect, local); err != nil {
		return err
	}
	if r.testPushStats != nil {
		r.testPushStats(st)
	}
	if v.autoGC && (packs+1 > v.limit || looseEstimate(gitDir) > v.gcAuto) && time.Since(r.filePush.lastGC) >= autoGCSpacing {
		// As receive-pack would after this push (receive.autogc); gc itself decides.
		r.filePush.lastGC = time.Now()
		if err := gitremote.StartAutoGC(gitDir); err != nil {
			r.log.Warn("git gc --auto in the file remote", "remote", gitDir, "err", err)
		}
	}
	return nil
}

// writeFileRemoteObjects writes objs, read whole from src and checked against their names,
// into the file remote at gitDir, durable before it returns: as receive-pack keeps a push,
// loose objects below git's transfer.unpackLimit (100), one pack from there. Every object
// is written, also one the remote holds: its objects a lost race left are never named by a
// ref and are pruned by its gc, and one written again is not pruned just as a ref names it.
func writeFileRemoteObjects(src *gitstore.Storage, gitDir string, objs []plumbing.Hash) error {
	raws := make([]gitstore.RawObject, 0, len(objs))
	total := 0
	for _, h := range objs {
		t, b, err := src.ReadBounded(h, min(maxCopyObject, int64(maxCopyBytes-total)))
		if err != nil {
			return err
		}
		total += len(b)
		raws = append(raws, gitstore.RawObject{Hash: h, Type: t, Content: b})
	}
	if len(raws) >= unpackLimit {
		return gitstore.WritePack(gitDir, raws)
	}
	b := gitstore.NewObjectBatchAll(gitDir)
	for _, o := range raws {
		if _, err := b.Write(o.Type, o.Content); err != nil {
			b.Discard()
			return err
		}
	}
	return b.Flush()
}

// looseEstimate is git's count of a repository's loose objects for gc --auto: the objects
// in objects/17, times 256.
func looseEstimate(gitDir string) int {
	es, err := os.ReadDir(filepath.Join(gitDir, "objects", "17"))
	if err != nil {
		return 0
	}
	return 256 * len(es)
}

// moveFileRemoteRef moves the file remote's ref at path from expect to local under git's
// "<ref>.lock", created already holding local (gitstore.CreateFullLock: a memd killed here
// leaves no stale lock but in a read and a rename): a lost race when the lock is taken or
// the ref is elsewhere.
//
// The lock and the ref are the remote's git files, written with plain os calls as gitstore
// writes a repository's own (gitstore/lock.go says why): no fetched tree names them, and the
// lock is created exclusively, never through a link.
func (r *Repo) moveFileRemoteRef(gitDir, path string, expect, local plumbing.Hash) error {
	lock, err := gitstore.CreateFullLock(path, []byte(local.String()+"\n"), gitDir)
	if errors.Is(err, gitstore.ErrLocked) {
		if fi, serr := os.Stat(path + ".lock"); serr == nil && time.Since(fi.ModTime()) > refLockStaleAge {
			return fmt.Errorf("%w: %s.lock is stale", errPushDeclined, path) // git says why
		}
		return fmt.Errorf("%w (%w)", errRemoteMovedDirect, gitremote.ErrPushRejected)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errPushDeclined, err)
	}
	cur, err := gitstore.ReadRef(gitDir, r.BranchRef().String())
	if err == nil && cur != expect {
		err = fmt.Errorf("%w (%w)", errRemoteMovedDirect, gitremote.ErrPushRejected)
	}
	if err == nil {
		err = os.Rename(lock, path)
	}
	if err != nil {
		_ = os.Remove(lock)
		if errors.Is(err, gitremote.ErrPushRejected) {
			return err
		}
		return fmt.Errorf("push into %s: %w", gitDir, err)
	}
	return nil
}

// filePushVerdictLocked says whether the file remote at gitDir takes the direct push, from
// its effective config and hooks, read again when one of their files changed or
// filePushRecheck passed.
func (r *Repo) filePushVerdictLocked(ctx context.Context, gitDir string) filePushVerdict {
	sig := receiveSignature(gitDir)
	v := &r.filePush
	if v.dir == gitDir && v.sig == sig && time.Since(v.at) < filePushRecheck {
		return *v
	}
	lastGC := v.lastGC
	if v.dir != gitDir {
		lastGC = time.Time{}
	}
	*v = filePushVerdict{dir: gitDir, sig: sig, at: time.Now(), lastGC: lastGC}
	v.limit, v.gcAuto, v.autoGC, v.why = receiveVerdict(ctx, gitDir)
	return *v
}

// receiveVerdict reads what receive-pack would act on in the repository at gitDir: why the
// direct push must not take it ("" = it may), gc.autoPackLimit, gc.auto and whether gc
// --auto runs there at all.
func receiveVerdict(ctx context.Context, gitDir string) (limit, gcAuto int, autoGC bool, why string) {
	limit, gcAuto, autoGC = defaultAutoPackLimit, defaultGCAuto, true
	if _, err := os.Lstat(filepath.Join(gitDir, "shallow")); err == nil {
		return limit, gcAuto, autoGC, "a shallow repository"
	}
	for _, h := range receiveHooks {
		if fi, err := os.Stat(filepath.Join(gitDir, "hooks", h)); err == nil && fi.Mode()&0o111 != 0 {
			return limit, gcAuto, autoGC, "its " + h + " hook runs on a push"
		}
	}
	kv, err := gitremote.RepoConfig(ctx, gitDir)
	if err != nil {
		return limit, gcAuto, autoGC, err.Error()
	}
	bare := false
	for _, p := range kv {
		k, val := p[0], p[1]
		n, nerr := strconv.Atoi(val)
		switch {
		case k == "core.bare":
			bare = gitremote.GitTrue(val)
		case strings.HasPrefix(k, "receive."), strings.HasPrefix(k, "extensions."),
			k == "core.hookspath", k == "core.sharedrepository", k == "transfer.fsckobjects",
			k == "transfer.unpacklimit":
			return limit, gcAuto, autoGC, k + " is set"
		case k == "core.logallrefupdates" && !gitremote.GitFalse(val):
			return limit, gcAuto, autoGC, k + " is set"
		case k == "gc.auto" && nerr == nil:
			gcAuto = n
		case k == "gc.autopacklimit" && nerr == nil:
			limit = n
		}
	}
	autoGC = gcAuto > 0 && limit > 0 // either 0 turns gc --auto's pack count off
	if limit <= 0 {
		limit = defaultAutoPackLimit // packs still bounded: past twice this, git pushes
	}
	if !bare {
		return limit, gcAuto, autoGC, "not a bare repository"
	}
	return limit, gcAuto, autoGC, ""
}

// receiveSignature stamps the files receiveVerdict's answer comes from: the remote's config
// and hooks, the user's and the system's config.
func receiveSignature(gitDir string) string {
	paths := []string{filepath.Join(gitDir, "config"), filepath.Join(gitDir, "shallow"), "/etc/gitconfig"}
	for _, h := range receiveHooks {
		paths = append(paths, filepath.Join(gitDir, "hooks", h))
	}
	if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".gitconfig"), filepath.Join(home, ".config", "git", "config"))
	}
	if v := os.Getenv("XDG_CONFIG_HOME"); v != "" {
		paths = append(paths, filepath.Join(v, "git", "config"))
	}
	for _, env := range []string{"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"} { // files, not directories
		if v := os.Getenv(env); v != "" {
			paths = append(paths, v)
		}
	}
	var b strings.Builder
	for _, p := range paths {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			b.WriteString("-;")
			continue
		}
		if err != nil {
			b.WriteString("?;")
			continue
		}
		fmt.Fprintf(&b, "%d.%d.%o;", fi.ModTime().UnixNano(), fi.Size(), fi.Mode())
	}
	return b.String()
}

// countPacks is the number of packs in gitDir's objects/pack.
func countPacks(gitDir string) int {
	es, err := os.ReadDir(filepath.Join(gitDir, "objects", "pack"))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range es {
		if strings.HasSuffix(e.Name(), ".idx") {
			n++
		}
	}
	return n
}
