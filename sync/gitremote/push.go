package gitremote

// Push with an object enumeration whose cost follows what is new, not the
// length of history.
//
// go-git v5's Remote.PushContext computes the objects to send with
// revlist.Objects / ObjectsWithStorageForIgnores, which first walk every
// commit reachable from the remote's refs and every tree of each (go-git
// issues #935, #1102; fixed only in v6). memd pushes after every commit and
// runs for months, so that made each push O(history) in time and memory.
//
// SendPack opens the receive-pack session itself and enumerates only:
//   - the new commits: those reachable from the local head and not from the
//     remote head (old), found by walking both sides together newest first
//     and stopping once everything still queued is reachable from old
//     (git's limit_list / paint-down);
//   - for each new commit's tree, the entries that differ from the entries
//     at the same path in the boundary commits (old and the old-side parents
//     of new commits), whose trees the remote has in full.
//
// Safety: a commit is only marked as on the remote when it is reachable
// from old, and a tree entry is only skipped when its hash equals one in a
// tree the remote has. Clock skew or stopping early can therefore only make
// the pack larger (objects the remote already has), never incomplete. The
// remote's receive-pack checks connectivity anyway and rejects a pack that
// lacks objects.

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	"github.com/go-git/go-git/v5/storage"
)

// DefaultPushWalkLimit bounds the commits the new-commit walk pops; beyond it (a
// pathological history: a remote far behind, or a remote side whose
// commits are dated far in the future, which the newest-first walk pops
// first) the push goes through go-git's own enumeration rather than an
// unbounded walk of ours. Push.WalkLimit lowers it in tests.
const DefaultPushWalkLimit = 100000

// ErrPushWalkTooLong says the commit walk hit its limit (PushObjects).
var ErrPushWalkTooLong = errors.New("push: commit walk exceeded its limit")

// PushStats describes one push's enumeration (tests and debug logs).
type PushStats struct {
	Fallback   string // why go-git's PushContext was used; "" = ours
	Walked     int    // commits popped by the new-commit walk
	NewCommits int
	Trees      int             // trees read by the tree walk (new commits' and boundary)
	Objects    int             // objects in the pack
	Prebuilt   bool            // the pack was built before the session (Push.Expect held)
	Direct     bool            // written into a file remote without its receive-pack (gitrepo/filepush.go)
	Old, New   plumbing.Hash   // remote head before, pushed head
	Sent       []plumbing.Hash // the pack's objects (our path only)
}

// Push is one push: Local to the branch Branch of Remote at Target, from the
// object store Store (objects and config). The caller keeps Store still for
// the push (gitrepo holds its repo lock): nothing here touches a work tree or
// a local ref.
type Push struct {
	Store  storage.Storer
	Remote *git.Remote
	Target *Target
	Branch plumbing.ReferenceName
	Local  plumbing.Hash
	Log    *slog.Logger
	// Expect is the remote head as of the caller's last fetch (zero: not known). The pack
	// for Expect..Local is then built before the remote's receive-pack starts, and sent when
	// the remote still advertises Expect (prebuildPack).
	Expect plumbing.Hash
	// WalkLimit bounds the new-commit walk; 0 = DefaultPushWalkLimit.
	WalkLimit int
	// Stats, when set (tests), receives the push's enumeration.
	Stats func(PushStats)
}

// SendPack pushes p.Local to the branch p.Branch of the remote, never
// forced. It returns what go-git's PushContext would: nil,
// git.NoErrAlreadyUpToDate, or an unclassified error (the caller
// classifies it).
func SendPack(ctx context.Context, p Push) (err error) {
	ctx, cancel := uncancelledIfLocal(ctx, p.Target.URL)
	defer cancel()
	st := PushStats{New: p.Local}
	defer func() {
		if p.Stats != nil {
			p.Stats(st)
		}
	}()

	var pre *prebuilt
	if !p.Expect.IsZero() && p.Expect != p.Local {
		pre = prebuildPack(p.Store, p.Local, p.Expect, p.WalkLimit)
	}

	sess, err := openReceivePack(p.Remote, p.Target)
	if err != nil {
		return err
	}
	closed := false
	closeSess := func() error {
		if closed {
			return nil
		}
		closed = true
		return sess.Close()
	}
	defer func() {
		if cerr := closeSess(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	return pushOnSession(ctx, p, sess, closeSess, pre, &st)
}

// pushOnSession is SendPack once its receive-pack session sess is open: it reads the
// remote's head from the advertisement and sends what the remote lacks, the prebuilt
// pack pre when it still fits, else our own enumeration's, else (where ours cannot or
// should not diff) it closes sess with closeSess and pushes through go-git. It records
// the push in st.
func pushOnSession(ctx context.Context, p Push, sess transport.ReceivePackSession, closeSess func() error,
	pre *prebuilt, st *PushStats) error {
	br, local := p.Branch, p.Local
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil {
		return err
	}
	old, why, err := remoteBranchHead(ar, br)
	if err != nil {
		return err
	}
	if why != "" {
		// Our session is closed first so the remote serves go-git's.
		_ = closeSess()
		return pushFallback(ctx, p, st, why)
	}
	st.Old = old
	if old == local {
		return git.NoErrAlreadyUpToDate
	}
	if pre != nil && old == p.Expect && ar.Capabilities.Supports(capability.OFSDelta) {
		st.Walked, st.NewCommits, st.Trees, st.Objects, st.Sent = pre.st.Walked, pre.st.NewCommits, pre.st.Trees, pre.st.Objects, pre.st.Sent
		st.Prebuilt = true
		return sendUpdate(ctx, p.Store, sess, ar, br, old, local, pre.objs, pre.pack)
	}
	if err := haveRemoteHead(p.Store, old, br, st); err != nil {
		return err
	}

	objs, ff, err := PushObjects(p.Store, local, old, p.WalkLimit, st)
	switch {
	case errors.Is(err, ErrPushWalkTooLong):
		_ = closeSess()
		return pushFallback(ctx, p, st, err.Error())
	case err != nil:
		// Whatever broke our walk, go-git's would meet too or cope with.
		_ = closeSess()
		return pushFallback(ctx, p, st, err.Error())
	case !ff:
		return fmt.Errorf("non-fast-forward update: %s", br)
	}

	return sendUpdate(ctx, p.Store, sess, ar, br, old, local, objs, nil)
}

// remoteBranchHead is the hash the remote advertises for br in ar. A non-empty why says
// instead why there is nothing on the remote for our enumeration to diff against, and
// the push should go through go-git.
func remoteBranchHead(ar *packp.AdvRefs, br plumbing.ReferenceName) (old plumbing.Hash, why string, err error) {
	remoteRefs, err := ar.AllReferences()
	if err != nil {
		return plumbing.ZeroHash, "", err
	}
	ref, err := remoteRefs.Reference(br)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		// First push: nothing on the remote to diff against.
		return plumbing.ZeroHash, "remote branch absent", nil
	case err != nil:
		return plumbing.ZeroHash, "", err
	case ref.Type() != plumbing.HashReference:
		return plumbing.ZeroHash, "remote branch is not a hash reference", nil
	}
	return ref.Hash(), "", nil
}

// pushFallback pushes p through go-git's own enumeration, recording why in st.
func pushFallback(ctx context.Context, p Push, st *PushStats, why string) error {
	st.Fallback = why
	return pushThroughGoGit(ctx, p.Log, p.Remote, p.Target, p.Branch, why)
}

// maxPrebuiltPack bounds the pack prebuildPack keeps in memory; a larger push streams its
// pack as it is encoded, after the advertisement, as before.
const maxPrebuiltPack = 16 << 20

// prebuilt is a push's pack built before the session: its objects and their encoding
// (ofs-deltas, which every git since 1.4.4 takes).
type prebuilt struct {
	objs []plumbing.Hash
	pack []byte
	st   PushStats
}

// prebuildPack enumerates and encodes the objects that move a remote at expect to local.
// A remote's receive-pack holds the ref's old value from its advertisement to its update:
// a push that walks and delta-searches inside that window (under a full CPU, hundreds of
// milliseconds) loses races that one sending a ready pack wins, and makes the remote
// unpack a pack it then refuses ("cannot lock ref"). nil when the pack cannot be built
// ahead (not a fast-forward of expect, a walk past its limit, a pack over
// maxPrebuiltPack): SendPack then does as before, against the advertised head.
func prebuildPack(s storage.Storer, local, expect plumbing.Hash, limit int) *prebuilt {
	if s.HasEncodedObject(expect) != nil {
		return nil
	}
	var st PushStats
	objs, ff, err := PushObjects(s, local, expect, limit, &st)
	if err != nil || !ff {
		return nil
	}
	cfg, err := s.Config()
	if err != nil {
		return nil
	}
	var w packBuffer
	if _, err := packfile.NewEncoder(&w, s, false).Encode(objs, cfg.Pack.Window); err != nil {
		return nil
	}
	return &prebuilt{objs: objs, pack: w.b, st: st}
}

// packBuffer holds a pack being encoded, up to maxPrebuiltPack.
type packBuffer struct{ b []byte }

var errPackTooBig = errors.New("push: pack over the size built ahead")

func (w *packBuffer) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > maxPrebuiltPack {
		return 0, errPackTooBig
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// pushThroughGoGit pushes br with go-git's PushContext (its own object walk),
// never forced: for a first push, or when our enumeration cannot serve.
func pushThroughGoGit(ctx context.Context, log *slog.Logger, rem *git.Remote, tgt *Target,
	br plumbing.ReferenceName, why string) error {
	log.Debug("push through go-git's object walk", "why", why)
	// No Progress: go-git would ask for side-band without "quiet", and receive-pack's unpack
	// progress, written while go-git is still sending (it reads only after), can fill the
	// pipe on a large pack. A refusal here carries the verdict without the hook's words.
	err := rem.PushContext(ctx, &git.PushOptions{
		RemoteName: rem.Config().Name,
		RefSpecs:   []config.RefSpec{config.RefSpec(br.String() + ":" + br.String())},
		Auth:       tgt.Auth,
		Force:      false,
		CABundle:   tgt.CABundle, InsecureSkipTLS: tgt.InsecureSkipTLS, ProxyOptions: tgt.Proxy,
	})
	if err != nil && IsReportStatus(err) {
		return &Refusal{Status: err.Error()}
	}
	return err
}

// remoteSaid keeps the first few KiB of what the remote sends on its progress channel
// during a push: a refusing hook's message is there.
type remoteSaid struct{ strings.Builder }

func newRemoteSaid() *remoteSaid { return &remoteSaid{} }

func (s *remoteSaid) Write(p []byte) (int, error) {
	if room := 8192 - s.Len(); room > 0 {
		s.Builder.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// uncancelledIfLocal keeps a push to a file remote from being killed half-way. There
// go-git runs `git receive-pack` as memd's own child and, when ctx is cancelled (a daemon
// stopping mid-push), ends it with SIGKILL: killed between its ref update and its cleanup,
// it leaves HEAD.lock or the branch's .lock in the remote, which then refuses every later
// push, memd's and the user's, until someone removes it by hand (git's lock files are not
// taken over). A local push is short: it runs to its end, bounded by ctx's deadline (or
// localPushTimeout) but not by its cancellation. A network push is the server's to clean up.
func uncancelledIfLocal(ctx context.Context, url string) (context.Context, context.CancelFunc) {
	ep, err := transport.NewEndpoint(url)
	if err != nil || ep.Protocol != "file" {
		return ctx, func() {}
	}
	bound := localPushTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = time.Until(dl)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), bound)
}

// localPushTimeout bounds a push to a file remote whose caller set no deadline.
const localPushTimeout = 2 * time.Minute

// openReceivePack opens a receive-pack session with the remote rem.
func openReceivePack(rem *git.Remote, tgt *Target) (transport.ReceivePackSession, error) {
	// Same target as go-git's PushContext: the remote's last URL (remoteAt
	// gives it exactly one, the resolved one).
	url := tgt.URL
	if urls := rem.Config().URLs; len(urls) > 0 {
		url = urls[len(urls)-1]
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, err
	}
	c, err := client.NewClient(ep)
	if err != nil {
		return nil, err
	}
	tgt.Apply(ep)
	return c.NewReceivePackSession(ep, tgt.Auth)
}

// haveRemoteHead checks that the remote's head old is in our history; a
// head we lack rejects the push as a non-fast-forward of br.
func haveRemoteHead(s storer.EncodedObjectStorer, old plumbing.Hash, br plumbing.ReferenceName, st *PushStats) error {
	err := s.HasEncodedObject(old)
	if err == nil {
		return nil
	}
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return fmt.Errorf("push: look up remote head %s: %w", old.String()[:12], err)
	}
	// The remote moved since our last fetch: old is not in our
	// history, so this is not a fast-forward. Rejected without
	// sending anything, as go-git would (after walking all of our
	// history to find that out); Sync fetches, merges and retries.
	st.Fallback = "remote head unknown locally: rejected"
	return fmt.Errorf("non-fast-forward update: %s", br)
}

// sendUpdate asks the remote to move br from old to local and sends objs,
// returning the remote's verdict.
func sendUpdate(ctx context.Context, s storage.Storer, sess transport.ReceivePackSession, ar *packp.AdvRefs,
	br plumbing.ReferenceName, old, local plumbing.Hash, objs []plumbing.Hash, pack []byte) error {
	// As go-git's newReferenceUpdateRequest: agent and report-status from
	// the server's capabilities; side-band when offered, so that what a
	// refusing hook says reaches us (Refusal); no push options, not atomic
	// (one ref).
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: br, Old: old, New: local}}
	said := newRemoteSaid()
	// quiet: no unpack progress on the side-band while the pack is still being sent
	// (receive-pack writes it as it reads, and we read nothing until the pack is out: a
	// large pack would fill the pipe both ways). A hook's words come after, and still do.
	if ar.Capabilities.Supports(capability.Quiet) {
		_ = req.Capabilities.Set(capability.Quiet)
	}
	if ar.Capabilities.Supports(capability.Sideband64k) {
		_ = req.Capabilities.Set(capability.Sideband64k)
		req.Progress = said
	} else if ar.Capabilities.Supports(capability.Sideband) {
		_ = req.Capabilities.Set(capability.Sideband)
		req.Progress = said
	}
	var rs *packp.ReportStatus
	var err error
	if pack != nil {
		req.Packfile = io.NopCloser(bytes.NewReader(pack))
		rs, err = sess.ReceivePack(ctx, req)
	} else {
		useRefDeltas := !ar.Capabilities.Supports(capability.OFSDelta)
		rs, err = encodeAndSend(ctx, s, sess, req, objs, useRefDeltas)
	}
	if rs != nil {
		// The remote answered with a verdict (ng, unpack error): its own reason.
		if rerr := rs.Error(); rerr != nil {
			return &Refusal{Status: rerr.Error(), Remote: said.String()}
		}
	}
	return err
}

// encodeAndSend streams the pack of hs to the session, as go-git's
// pushHashes does: the encoder writes into a pipe the session reads.
func encodeAndSend(ctx context.Context, s storage.Storer, sess transport.ReceivePackSession,
	req *packp.ReferenceUpdateRequest, hs []plumbing.Hash, useRefDeltas bool) (*packp.ReportStatus, error) {
	cfg, err := s.Config()
	if err != nil {
		return nil, fmt.Errorf("push: read config: %w", err)
	}
	rd, wr := io.Pipe()
	req.Packfile = rd
	// Buffered so the encoder can finish even when ReceivePack failed.
	done := make(chan error, 1)
	go func() {
		e := packfile.NewEncoder(wr, s, useRefDeltas)
		if _, err := e.Encode(hs, cfg.Pack.Window); err != nil {
			done <- wr.CloseWithError(fmt.Errorf("push: encode pack: %w", err))
			return
		}
		done <- wr.Close()
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		// Unblock the encoder's writes, then wait for it: it reads the
		// object store, which the caller's lock protects.
		_ = rd.CloseWithError(err)
		<-done
		return rs, err
	}
	if err := <-done; err != nil {
		return nil, err
	}
	return rs, nil
}

// Commit walk flags.
const (
	pwLocal = 1 << iota // reachable from the local head
	pwOld               // reachable from the remote head: on the remote
)

// PushObjects returns the objects of s to send so that a remote at old can
// move to local: the new commits and the parts of their trees that are not
// in the boundary commits' trees. ff reports whether old is an ancestor of
// local. limit bounds the commit walk (0 = DefaultPushWalkLimit).
func PushObjects(s storer.EncodedObjectStorer, local, old plumbing.Hash, limit int, st *PushStats) (objs []plumbing.Hash, ff bool, err error) {
	pw, err := paintPush(s, local, old, limit, st)
	if err != nil {
		return nil, false, err
	}
	// When the walk ends, every commit reached from local only has been
	// popped and its parents marked, so the local mark has reached old
	// along any path from local to old that exists.
	ff = pw.flags[old]&pwLocal != 0

	newCommits, bases, err := pw.newAndBoundary(s, old)
	if err != nil {
		return nil, false, err
	}
	st.NewCommits = len(newCommits)
	objs, err = newObjects(s, newCommits, bases, st)
	if err != nil {
		return nil, false, err
	}
	st.Objects = len(objs)
	st.Sent = objs
	return objs, ff, nil
}

// newObjects is newCommits and what their trees hold that the trees bases (the boundary
// commits', had in full on the other side) do not at the same path.
func newObjects(s storer.EncodedObjectStorer, newCommits []*object.Commit, bases []plumbing.Hash, st *PushStats) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	objs := make([]plumbing.Hash, 0, len(newCommits))
	for _, c := range newCommits {
		seen[c.Hash] = true
		objs = append(objs, c.Hash)
	}
	tw := treeWalker{s: s, seen: seen, st: st, trees: map[plumbing.Hash]map[string]object.TreeEntry{}}
	for _, c := range newCommits {
		if err := tw.walk(c.TreeHash, bases); err != nil {
			return nil, err
		}
	}
	return append(objs, tw.out...), nil
}

// pushWalk is the painted commit walk of a push: each commit reached, with
// the pwLocal/pwOld marks it got.
type pushWalk struct {
	flags   map[plumbing.Hash]uint8
	commits map[plumbing.Hash]*object.Commit
}

// paintPush walks the commits of local and old together, newest first,
// marking each with the sides it is reachable from, until every commit still
// queued is reachable from old, or limit commits were popped (0 =
// DefaultPushWalkLimit).
func paintPush(s storer.EncodedObjectStorer, local, old plumbing.Hash, limit int, st *PushStats) (*pushWalk, error) {
	if limit <= 0 {
		limit = DefaultPushWalkLimit
	}
	pw := &pushWalk{flags: map[plumbing.Hash]uint8{}, commits: map[plumbing.Hash]*object.Commit{}}
	flags, commits := pw.flags, pw.commits
	q := &commitHeap{}
	add := func(h plumbing.Hash, f uint8) error {
		prev := flags[h]
		if prev|f == prev {
			return nil
		}
		flags[h] = prev | f
		c := commits[h]
		if c == nil {
			var err error
			if c, err = object.GetCommit(s, h); err != nil {
				return fmt.Errorf("push: read commit %s: %w", h, err)
			}
			commits[h] = c
		}
		heap.Push(q, paintedCommit{c: c, f: prev | f, open: (prev|f)&pwOld == 0})
		return nil
	}
	if err := add(local, pwLocal); err != nil {
		return nil, err
	}
	if err := add(old, pwOld); err != nil {
		return nil, err
	}
	// A shallow clone's graft points end the walk as git's (mergebase.go's shallowSet): the
	// commits above them are what a push can send.
	shallow := shallowSet(s)
	// Stop once every queued commit is reachable from old: nothing below
	// them can be new. Re-queuing on a flag change (a commit reached from
	// old after it was popped as local-only) carries the old mark down even
	// when committer dates go backwards.
	for q.Len() > 0 && q.open > 0 {
		it := heap.Pop(q).(paintedCommit)
		st.Walked++
		if st.Walked > limit {
			return nil, ErrPushWalkTooLong
		}
		f := flags[it.c.Hash]
		if shallow[it.c.Hash] {
			continue
		}
		for _, p := range it.c.ParentHashes {
			if err := add(p, f); err != nil {
				return nil, err
			}
		}
	}
	return pw, nil
}

// newAndBoundary lists the new commits (reached from local only) and the
// trees of the boundary commits: old and the old-side parents of new
// commits, whose trees the remote has in full.
func (pw *pushWalk) newAndBoundary(s storer.EncodedObjectStorer, old plumbing.Hash) (newCommits []*object.Commit, bases []plumbing.Hash, err error) {
	baseSet := map[plumbing.Hash]bool{old: true}
	for h, f := range pw.flags {
		if f != pwLocal {
			continue
		}
		c := pw.commits[h]
		newCommits = append(newCommits, c)
		for _, p := range c.ParentHashes {
			if pw.flags[p]&pwOld != 0 {
				baseSet[p] = true
			}
		}
	}
	for h := range baseSet {
		c := pw.commits[h]
		if c == nil {
			if c, err = object.GetCommit(s, h); err != nil {
				return nil, nil, fmt.Errorf("push: read boundary commit %s: %w", h, err)
			}
		}
		bases = append(bases, c.TreeHash)
	}
	return newCommits, bases, nil
}

// treeWalker collects the objects of new trees missing from the boundary
// trees at the same path.
type treeWalker struct {
	s     storer.EncodedObjectStorer
	seen  map[plumbing.Hash]bool
	out   []plumbing.Hash
	st    *PushStats
	trees map[plumbing.Hash]map[string]object.TreeEntry // boundary trees read, by hash
}

// entries reads tree h as name → entry (cached: boundary trees are shared
// by every new commit).
func (tw *treeWalker) entries(h plumbing.Hash) (map[string]object.TreeEntry, error) {
	if m, ok := tw.trees[h]; ok {
		return m, nil
	}
	t, err := object.GetTree(tw.s, h)
	if err != nil {
		return nil, fmt.Errorf("push: read tree %s: %w", h, err)
	}
	tw.st.Trees++
	m := make(map[string]object.TreeEntry, len(t.Entries))
	for _, e := range t.Entries {
		m[e.Name] = e
	}
	tw.trees[h] = m
	return m, nil
}

// walk adds tree h and what under it is new. bases are the trees at the
// same path in the boundary commits (on the remote with everything below
// them).
func (tw *treeWalker) walk(h plumbing.Hash, bases []plumbing.Hash) error {
	if tw.seen[h] {
		return nil
	}
	for _, b := range bases {
		if b == h {
			return nil // the remote has this tree and all below it
		}
	}
	tw.seen[h] = true
	tw.out = append(tw.out, h)
	cur, err := tw.entries(h)
	if err != nil {
		return err
	}
	baseEntries := make([]map[string]object.TreeEntry, 0, len(bases))
	for _, b := range bases {
		m, err := tw.entries(b)
		if err != nil {
			return err
		}
		baseEntries = append(baseEntries, m)
	}
	// Not cached beyond this walk: a new tree is read once (seen).
	delete(tw.trees, h)
	var sub []plumbing.Hash
next:
	for name, e := range cur {
		if e.Mode == filemode.Submodule {
			continue // a commit of another repository: never sent
		}
		sub = sub[:0]
		for _, be := range baseEntries {
			b, ok := be[name]
			if !ok {
				continue
			}
			if b.Hash == e.Hash {
				continue next // on the remote, with everything below it
			}
			if b.Mode == filemode.Dir {
				sub = append(sub, b.Hash)
			}
		}
		if e.Mode == filemode.Dir {
			if err := tw.walk(e.Hash, append([]plumbing.Hash(nil), sub...)); err != nil {
				return err
			}
			continue
		}
		if !tw.seen[e.Hash] {
			tw.seen[e.Hash] = true
			tw.out = append(tw.out, e.Hash)
		}
	}
	return nil
}
