package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/demo"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepair"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func init() {
	register("init", "create the git repo and the PARA skeleton, or adopt a directory of project memories (+ remote, + --demo memories)", cmdInit)
}

func cmdInit(a *app, args []string) int {
	o, code, ok := parseInit(a, args)
	if !ok {
		return code
	}
	dir := o.dir
	// DIR is the user's choice (a plain path); inside it everything goes through safefs
	// (Scaffold, demo.Generate, the checkout).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return a.fail("init %s: %v", dir, err)
	}
	if _, err := gitrepo.Init(dir, a.cfg.Sync.Branch); err != nil {
		return a.fail("init %s: %v", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Reopen the way every command opens a repo (docs/ARCHITECTURE.md §10): the configured
	// author, clock and ignore rules, and an existing repo's crash leftovers repaired before
	// init commits what it added (Init only creates the repository).
	sess, err := agent.Open(ctx, a.cfg, agent.OpenOptions{Logger: a.log, Now: a.now, Who: "memd init"})
	if err != nil {
		return a.fail("open %s: %v", dir, err)
	}
	defer sess.Close()
	repo := sess.Repo()
	ro := gitrepo.RemoteOptionsFromConfig(a.cfg)
	ro.URL = o.remote
	if o.remote != "" {
		if err := initRemote(ctx, a, repo, ro); err != nil {
			return a.fail("%v", err)
		}
	}
	created, err := initContent(a, &o)
	if err != nil {
		return a.fail("%v", err)
	}
	// An existing repo only gets what init added; demo and adopted files are all new.
	paths := created
	if o.demo {
		if paths, err = repo.Reconcile(); err != nil {
			return a.fail("init %s: %v", dir, err)
		}
	}
	res, err := repo.CommitPathsMessage(paths, initMessage(o.layout, len(created), o.demo), memd.CommitChange)
	if err != nil {
		return a.fail("init commit: %v", err)
	}
	if err := sess.RefreshIndex(); err != nil {
		return a.fail("init index: %v", err)
	}
	if res.Hash != "" {
		fmt.Fprintf(a.stdout, "committed %d files on %s\n", res.Added+res.Modified+res.Deleted, a.cfg.Sync.Branch)
	}
	if o.remote != "" && a.cfg.Sync.Push {
		if _, err := repo.Sync(ctx, ro); err != nil {
			return a.fail("first sync with %s: %v (the local repo is ready; memd run retries)", gitremote.RedactURL(o.remote), err)
		}
		fmt.Fprintf(a.stdout, "pushed to %s/%s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	if o.layout == scaffold.LayoutProjectMemory {
		fmt.Fprintf(a.stdout, "layout: %s (project MEMORY.md files and topic files, no PARA buckets)\n", o.layout)
	}
	// Durable before "ready": a power cut in the kernel's writeback window must not leave an
	// empty HEAD or a zero-length object (docs/ARCHITECTURE.md §9.7).
	if err := gitrepair.SyncTree(dir); err != nil {
		return a.fail("init %s: %v", dir, err)
	}
	say(a.stdout, "memory repo ready: %s\n", dir)
	return exitOK
}

// initOptions are memd init's flags and DIR.
type initOptions struct {
	dir    string
	remote string
	layout string // empty: told from DIR once the remote is adopted
	demo   bool
	count  int
}

// parseInit parses and checks memd init's arguments; DIR becomes the
// config's repo.
func parseInit(a *app, args []string) (o initOptions, code int, ok bool) {
	fs := a.flags("init", "[DIR]")
	remote := fs.String("remote", "", "git remote `URL` to sync with (empty remote: first push creates main; with history: adopted)")
	withDemo := fs.Bool("demo", false, "add a realistic sample memory repo (a few hundred memories over several years)")
	count := fs.Int("demo-count", 300, "how many demo memories (with --demo)")
	layout := fs.String("layout", "", "repo `LAYOUT`: "+scaffold.LayoutPARA+" (the four PARA buckets) or "+scaffold.LayoutProjectMemory+
		" (<project>/MEMORY.md and topic files, no buckets); default: "+scaffold.LayoutProjectMemory+
		" when DIR (with the adopted --remote checked out) holds a project MEMORY.md and no PARA bucket, else "+scaffold.LayoutPARA)
	if code, ok := a.parse(fs, args); !ok {
		return o, code, false
	}
	if *layout != "" && *layout != scaffold.LayoutPARA && *layout != scaffold.LayoutProjectMemory {
		fmt.Fprintf(a.stderr, "memd init: --layout %q: want %s or %s\n", *layout, scaffold.LayoutPARA, scaffold.LayoutProjectMemory)
		return o, exitUsage, false
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(a.stderr, "memd init: at most one DIR")
		return o, exitUsage, false
	}
	dir := a.cfg.Repo
	if fs.NArg() == 1 {
		dir = absPath(memd.ExpandHome(fs.Arg(0)))
		a.cfg.Repo = dir
	}
	if *withDemo && *layout == scaffold.LayoutProjectMemory {
		fmt.Fprintf(a.stderr, "memd init: --demo writes PARA memories; it needs --layout %s\n", scaffold.LayoutPARA)
		return o, exitUsage, false
	}
	return initOptions{dir: dir, remote: *remote, layout: *layout, demo: *withDemo, count: *count}, exitOK, true
}

// initRemote sets the remote and its upstream and adopts the remote's
// history when it has one.
func initRemote(ctx context.Context, a *app, repo *gitrepo.Repo, ro gitrepo.RemoteOptions) error {
	if err := repo.SetRemote(a.cfg.Sync.Remote, ro.URL); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	// As git clone would: plain git pull/push/status work beside memd.
	if _, err := repo.SetUpstream(a.cfg.Sync.Remote); err != nil {
		return fmt.Errorf("remote: %w", err)
	}
	adopted, err := repo.AdoptRemote(ctx, ro)
	if err != nil {
		return fmt.Errorf("remote %s: %w", gitremote.RedactURL(ro.URL), err)
	}
	if adopted {
		fmt.Fprintf(a.stdout, "adopted %s/%s from %s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch, gitremote.RedactURL(ro.URL))
	}
	return nil
}

// initContent settles the layout (o.layout), scaffolds it and adds the demo
// memories; it returns the paths the scaffold created.
func initContent(a *app, o *initOptions) (created []string, err error) {
	// The layout is told after an adopted remote is checked out: a new machine's empty
	// directory takes the layout of the repo it joins.
	switch {
	case o.layout != "":
	case o.demo:
		o.layout = scaffold.LayoutPARA
	default:
		if o.layout, err = scaffold.DetectLayout(o.dir); err != nil {
			return nil, fmt.Errorf("init %s: %w", o.dir, err)
		}
	}
	created, err = scaffold.InitLayout(o.dir, o.layout)
	if err != nil {
		return nil, fmt.Errorf("init %s: %w", o.dir, err)
	}
	if o.demo {
		st, err := demo.Generate(o.dir, demo.Options{Memories: o.count, Now: a.now(), Seed: 1})
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		fmt.Fprintf(a.stdout, "demo: %d memories (%d episodes, %d tasks, %d in the inbox), %d ledger notes\n",
			st.Memories, st.Episodes, st.Tasks, st.Inbox, st.Notes)
	}
	return created, nil
}

func initMessage(layout string, created int, withDemo bool) string {
	msg := "memd: init"
	if withDemo {
		msg += " with demo memories"
	}
	what := "PARA skeleton"
	if layout == scaffold.LayoutProjectMemory {
		what = "project-memory layout, no PARA buckets"
	}
	return fmt.Sprintf("%s\n\n%s (%d paths created).\n", msg, what, created)
}
