package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// memd beside other writers (docs/ARCHITECTURE.md §11 "Other writers"): the user's own git on another
// branch, in a merge or a rebase, amending; `memd pause`; one-shot commands while `memd run`
// is up; a clean stop.

// statusDoc is what these tests read of status.json.
type statusDoc struct {
	State   string `json:"state"`
	Detail  string `json:"detail"`
	Pending int    `json:"pending"`
	Ahead   int    `json:"ahead"`
	Summary struct {
		Text string `json:"text"`
	} `json:"summary"`
	Paused *struct {
		Reason     string `json:"reason"`
		Until      string `json:"until"`
		CommitOnly bool   `json:"commit_only"`
	} `json:"paused"`
	LastSleep *struct {
		At time.Time `json:"at"`
	} `json:"last_sleep"`
	CommitsPerHour []int          `json:"commits_per_hour"`
	Events         []statusEvent  `json:"events"`
	ConflictCopies []string       `json:"conflict_copies"`
	Memories       map[string]int `json:"memories"`
}

// doc reads status.json as the daemon last wrote it (no process started: a poll every few
// ms stays cheap).
func (w *world) doc() statusDoc {
	w.t.Helper()
	var d statusDoc
	b, err := os.ReadFile(filepath.Join(w.repo, ".git", "memd", "status.json"))
	if err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

// waitDoc waits until the status document satisfies cond.
func (w *world) waitDoc(d *testutil.Daemon, what string, cond func(statusDoc) bool) statusDoc {
	w.t.Helper()
	var last statusDoc
	testutil.WaitFor(w.t, what, commitTimeout, func() bool { last = w.doc(); return cond(last) },
		func() string { b, _ := json.Marshal(last); return "status: " + string(b) + d.Describe() })
	return last
}

// waitPaused waits for state paused with a reason containing why and the pending edits
// seen (the commit job ran and stood aside).
func (w *world) waitPaused(d *testutil.Daemon, why string) statusDoc {
	w.t.Helper()
	return w.waitDoc(d, "paused: "+why, func(s statusDoc) bool {
		return s.State == "paused" && s.Paused != nil && strings.Contains(s.Paused.Reason, why) && s.Detail == s.Paused.Reason && s.Pending > 0
	})
}

// asUser gives the repo a git identity: a person commits here with plain git.
func (w *world) asUser() {
	w.git("config", "user.name", "A User")
	w.git("config", "user.email", "user@example.invalid")
}

func (w *world) rev(rev string) string { return testutil.Git{Env: w.env}.Rev(w.repo, rev) }

// noMarkersInHistory fails when any commit's tree holds a conflict marker.
func (w *world) noMarkersInHistory() {
	w.t.Helper()
	for _, c := range strings.Fields(w.git("rev-list", "--all")) {
		if out, _ := w.gitRun(nil, "grep", "-l", "-e", "^<<<<<<< ", c); strings.TrimSpace(out) != "" {
			w.t.Fatalf("commit %s holds conflict markers: %s", c, out)
		}
	}
}

// TestBranchSwitchPauses: on another branch nothing is committed on main (nor staged in the
// user's index); back on main, the edit made meanwhile is committed within a quiet period.
func TestBranchSwitchPauses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	w.waitCommitted(d)
	main := w.rev("main")
	w.git("checkout", "-q", "-b", "other")
	w.write("areas/on-other.html", "written on other\n")
	w.waitPaused(d, "HEAD is on other, not main")
	if got := w.rev("main"); got != main {
		t.Fatalf("main moved while HEAD was on other: %s -> %s%s", main, got, d.Describe())
	}
	if st := w.git("status", "--porcelain"); !strings.Contains(st, "?? areas/on-other.html") {
		t.Fatalf("the user's index was touched on other: git status\n%s", st)
	}
	if out, code := w.memd("status", "--config", w.config, "--repo", w.repo); code != 0 || !strings.HasPrefix(out, "memd: paused (HEAD on other) · ") {
		t.Fatalf("status line %q (exit %d)", out, code)
	}
	w.git("checkout", "-q", "main") // the untracked file comes along, as git carries it
	at := time.Now()
	w.waitCommitted(d)
	t.Logf("committed on main %s after the return", time.Since(at).Round(time.Millisecond))
	if took := time.Since(at); took > 2*time.Second+500*time.Millisecond {
		t.Fatalf("committed %s after the return to main: more than a quiet period", took)
	}
	if got, ok := w.committed("areas/on-other.html"); !ok || got != "written on other\n" {
		t.Fatalf("edit not committed on main after the return: %q %v", got, ok)
	}
	w.waitDoc(d, "state no longer paused", func(s statusDoc) bool { return s.State != "paused" && s.Paused == nil })
	w.checkClean(d)
}

// TestSleepReviewBranchLeavesMainAlone: memhtml's sleep checks out sleep/<date> and commits
// its moves there; memd commits nothing on main, and after the review's fast-forward main is
// the branch, with no memd commit of the branch's tree on top.
func TestSleepReviewBranchLeavesMainAlone(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.write("resources/2024-01-03-old.html", "old episode\n")
	w.asUser()
	d := w.start()
	w.waitCommitted(d)
	// memhtml's `git mv` reads the index, which memd brings up to its commit just after it.
	testutil.WaitFor(t, "the index to hold memd's commit", commitTimeout, func() bool {
		out, err := w.gitRun([]string{"GIT_OPTIONAL_LOCKS=0"}, "ls-files", "resources/2024-01-03-old.html")
		return err == nil && strings.TrimSpace(out) != ""
	}, d.Describe)
	main := w.rev("main")
	w.git("checkout", "-q", "-b", "sleep/2026-12-01")
	must(t, os.MkdirAll(w.path("archive/2024/resources"), 0o755))
	w.git("mv", "resources/2024-01-03-old.html", "archive/2024/resources/2024-01-03-old.html")
	w.write("areas/arcs/review.html", "arc\n")
	w.git("add", "-A")
	w.git("commit", "-q", "-m", "sleep: archive 1, arcs 1")
	review := w.rev("HEAD")
	w.waitPaused(d, "HEAD is on sleep/2026-12-01, not main")
	if got := w.rev("main"); got != main {
		t.Fatalf("main moved while the review branch was out: %s%s", w.git("log", "--oneline", "main"), d.Describe())
	}
	// memhtml sleep merge: main fast-forwards to the reviewed branch.
	w.git("checkout", "-q", "main")
	w.git("merge", "-q", "--ff-only", "sleep/2026-12-01")
	w.waitDoc(d, "resumed, nothing pending", func(s statusDoc) bool { return s.State != "paused" && s.Pending == 0 })
	w.waitCommitted(d)
	if got := w.rev("main"); got != review {
		t.Fatalf("main is %s, want the review branch %s: memd committed on top\n%s", got, review, w.git("log", "--oneline", "-3"))
	}
	w.checkClean(d)
}

// TestMergeConflictNotCommitted: a `git merge` that stops on a conflict leaves markers and
// MERGE_HEAD; memd commits nothing until the user finishes, then nothing with markers.
func TestMergeConflictNotCommitted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.write("areas/shared.html", "base\n")
	w.asUser()
	d := w.start()
	w.waitCommitted(d)
	w.git("branch", "topic")
	w.write("areas/shared.html", "main side\n")
	w.waitCommitted(d)
	w.git("checkout", "-q", "topic")
	w.write("areas/shared.html", "topic side\n")
	w.git("commit", "-q", "-am", "topic edit")
	w.git("checkout", "-q", "main")
	w.waitDoc(d, "back on main", func(s statusDoc) bool { return s.Paused == nil })
	before := w.rev("main")
	if _, err := w.gitRun(nil, "merge", "topic"); err == nil {
		t.Fatal("git merge did not stop on the conflict")
	}
	if !strings.Contains(w.read("areas/shared.html"), "<<<<<<<") {
		t.Fatal("no conflict markers in the work tree")
	}
	w.write("areas/during-merge.html", "written during the merge\n")
	w.waitPaused(d, "a merge is in progress")
	if got := w.rev("main"); got != before {
		t.Fatalf("memd committed during the merge: %s%s", w.git("log", "--oneline", "-3"), d.Describe())
	}
	w.noMarkersInHistory()
	w.write("areas/shared.html", "main side\ntopic side\n") // resolved by hand
	w.git("add", "areas/shared.html")
	w.git("commit", "-q", "--no-edit")
	userMerge := w.rev("HEAD")
	w.waitCommitted(d)
	if got, _ := w.committed("areas/during-merge.html"); got != "written during the merge\n" {
		t.Fatalf("the edit made during the merge was not committed after it: %q", got)
	}
	if parent := w.rev("HEAD~1"); parent != userMerge {
		t.Fatalf("memd's commit is not on the user's merge: HEAD~1 %s, merge %s", parent, userMerge)
	}
	w.noMarkersInHistory()
	w.checkClean(d)
}

// TestRebaseInProgressPauses: `git rebase -i` stopped at an edit: HEAD detached, rebase-merge/
// there; memd says a rebase is in progress and commits after `git rebase --continue`.
func TestRebaseInProgressPauses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.write("areas/one.html", "one\n")
	w.asUser()
	d := w.start()
	w.waitCommitted(d)
	w.write("areas/two.html", "two\n")
	w.waitCommitted(d)
	if _, err := w.gitRun([]string{"GIT_SEQUENCE_EDITOR=sed -i 1s/^pick/edit/"}, "rebase", "-i", "HEAD~1"); err != nil {
		t.Fatalf("git rebase -i: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.repo, ".git", "rebase-merge")); err != nil {
		t.Fatalf("the rebase did not stop: %v", err)
	}
	main := w.rev("main")
	w.write("areas/during-rebase.html", "written during the rebase\n")
	w.waitPaused(d, "a rebase is in progress")
	if got := w.rev("main"); got != main {
		t.Fatalf("main moved during the rebase%s", d.Describe())
	}
	if _, err := w.gitRun([]string{"GIT_EDITOR=true"}, "rebase", "--continue"); err != nil {
		t.Fatalf("git rebase --continue: %v", err)
	}
	w.waitCommitted(d)
	if got, _ := w.committed("areas/during-rebase.html"); got != "written during the rebase\n" {
		t.Fatalf("the edit made during the rebase was not committed after it: %q", got)
	}
	w.checkClean(d)
}

// remoteWorld is a world whose repo has an origin on a loopback git HTTP server.
func remoteWorld(t *testing.T, config string) (*world, string) {
	w := newWorldConfig(t, config)
	root := filepath.Join(w.home, "git")
	bare := filepath.Join(root, "remote.git")
	w.sh("git init -q --bare -b main " + bare)
	w.sh("git -C " + bare + " config http.receivepack true")
	srv := testutil.NewGitHTTPServer(t, root, "")
	w.sh("git remote add origin " + srv.URL("remote.git"))
	return w, bare
}

func bareRev(w *world, bare, rev string) string { return testutil.Git{Env: w.env}.Rev(bare, rev) }

// TestAmendOfUnpushedCommitPushesTheAmended: memd committed but has not pushed (paused with
// --commit-only); the user amends that commit; on resume the remote gets the amended commit
// and never the one rewritten away.
func TestAmendOfUnpushedCommitPushesTheAmended(t *testing.T) {
	t.Parallel()
	w, bare := remoteWorld(t, baseConfig)
	w.asUser()
	d := w.start()
	w.waitCommitted(d)
	testutil.WaitFor(t, "the first push", commitTimeout, func() bool { return bareRev(w, bare, "main") == w.rev("main") }, d.Describe)
	if out, code := w.memd("pause", "--commit-only", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd pause: exit %d\n%s", code, out)
	}
	w.waitDoc(d, "paused, commit only", func(s statusDoc) bool { return s.Paused != nil && s.Paused.CommitOnly })
	pushed := bareRev(w, bare, "main")
	w.write("areas/draft.html", "draft\n")
	w.waitCommitted(d)
	memdCommit := w.rev("main")
	if bareRev(w, bare, "main") != pushed {
		t.Fatal("pushed while paused --commit-only")
	}
	w.write("areas/draft.html", "draft, amended by hand\n")
	w.git("commit", "-q", "-a", "--amend", "-m", "draft, amended")
	amended := w.rev("main")
	if out, code := w.memd("resume", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd resume: exit %d\n%s", code, out)
	}
	testutil.WaitFor(t, "the amended commit pushed", commitTimeout, func() bool { return bareRev(w, bare, "main") == amended }, d.Describe)
	if _, err := (testutil.Git{Env: w.env}).Run(bare, nil, "cat-file", "-e", memdCommit); err == nil {
		t.Fatalf("the commit rewritten away (%s) reached the remote", memdCommit)
	}
	w.checkClean(d)
}

// TestPauseSurvivesRestartAndExpires: `memd pause` stops commits, holds across a restart
// (the stop's own commit included), and `memd resume` lets the edit through; a pause whose
// --for ran out (written with an earlier --now) ends by itself.
func TestPauseSurvivesRestartAndExpires(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	w.waitCommitted(d)
	head := w.rev("main")
	if out, code := w.memd("pause", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd pause: exit %d\n%s", code, out)
	}
	w.waitDoc(d, "paused", func(s statusDoc) bool { return s.State == "paused" })
	w.write("areas/held.html", "held by the pause\n")
	w.waitDoc(d, "paused with the edit pending", func(s statusDoc) bool { return s.State == "paused" && s.Pending > 0 })
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	if got := w.rev("main"); got != head {
		t.Fatal("the stop committed while paused")
	}
	d = w.start()
	w.waitDoc(d, "still paused after the restart", func(s statusDoc) bool { return s.State == "paused" && s.Pending > 0 })
	if got := w.rev("main"); got != head {
		t.Fatal("the restart committed while paused")
	}
	if out, code := w.memd("resume", "--config", w.config, "--repo", w.repo); code != 0 || !strings.Contains(out, "resumed") {
		t.Fatalf("memd resume: exit %d\n%s", code, out)
	}
	w.waitCommitted(d)

	// A pause of an hour from a clock two hours back has run out: it holds nothing.
	past := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if out, code := w.memd("pause", "--for", "1h", "--now", past, "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd pause --for: exit %d\n%s", code, out)
	}
	w.write("areas/after-expiry.html", "not held\n")
	w.waitCommitted(d)
	w.waitDoc(d, "not paused", func(s statusDoc) bool { return s.Paused == nil })
	if _, err := os.Stat(filepath.Join(w.repo, ".git", "memd", "pause.json")); !os.IsNotExist(err) {
		t.Fatalf("the pause that ran out is still on file: %v", err)
	}
	w.checkClean(d)
}

// TestOneShotSleepAndSyncShowInDaemon: a `memd sleep` and a `memd sync` run by hand while
// `memd run` is up show in the daemon's document (last sleep, events, commits per hour)
// within a second of the command's end.
func TestOneShotSleepAndSyncShowInDaemon(t *testing.T) {
	t.Parallel()
	w, _ := remoteWorld(t, `watch: {quiet: 1m, max_delay: 5m}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`)
	d := w.start()
	w.waitDoc(d, "the first publish", func(s statusDoc) bool { return s.State != "" && s.State != "busy" })
	if out, code := w.memd("sleep", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	ended := time.Now()
	var last statusDoc
	if !testutil.Poll(time.Second, func() bool { last = w.doc(); return last.LastSleep != nil }) {
		t.Fatalf("the one-shot sleep is not in the daemon's document %s after it ended: %+v%s", time.Since(ended), last, d.Describe())
	}
	t.Logf("one-shot sleep in the daemon's document %s after the command ended", time.Since(ended).Round(time.Millisecond))
	if !hasEvent(last.Events, "sleep: ") {
		t.Fatalf("no sleep event: %+v", last.Events)
	}
	commitsBefore := sum(w.doc().CommitsPerHour)
	w.write("areas/by-hand.html", "synced by hand\n") // quiet 1m: the daemon has not committed it
	if out, code := w.memd("sync", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd sync: exit %d\n%s", code, out)
	}
	ended = time.Now()
	if !testutil.Poll(time.Second, func() bool {
		last = w.doc()
		return sum(last.CommitsPerHour) > commitsBefore && hasEvent(last.Events, "memd sync: 1 commit, pushed")
	}) {
		t.Fatalf("the one-shot sync is not in the daemon's document %s after it ended: %+v%s", time.Since(ended), last, d.Describe())
	}
	t.Logf("one-shot sync in the daemon's document %s after the command ended", time.Since(ended).Round(time.Millisecond))
}

func hasEvent(evs []statusEvent, prefix string) bool {
	for _, e := range evs {
		if strings.HasPrefix(e.Text, prefix) {
			return true
		}
	}
	return false
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}

// TestConflictStateFollowsTheTree: state conflict holds while a conflict copy is in the
// tree and clears once it is removed (merged by hand and deleted), without a restart.
func TestConflictStateFollowsTheTree(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.write("areas/note.html", "theirs\n")
	d := w.start()
	w.waitCommitted(d)
	copyName := "areas/note.conflict-otherhost-20261201T101500Z.html"
	w.write(copyName, "ours\n")
	w.waitCommitted(d)
	w.waitDoc(d, "state conflict", func(s statusDoc) bool {
		return s.State == "conflict" && len(s.ConflictCopies) == 1 && strings.Contains(s.Summary.Text, "1 conflict")
	})
	w.write("areas/note.html", "theirs\nours\n") // merged by hand
	must(t, os.Remove(w.path(copyName)))
	w.waitCommitted(d)
	w.waitDoc(d, "conflict cleared", func(s statusDoc) bool {
		return s.State != "conflict" && len(s.ConflictCopies) == 0 && !strings.Contains(s.Summary.Text, "conflict")
	})
}

// TestStoppedOnSIGTERM: a clean stop's last document says stopped, and every status format
// renders it at once.
func TestStoppedOnSIGTERM(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	w.waitCommitted(d)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	if s := w.doc(); s.State != "stopped" {
		t.Fatalf("state after a clean stop: %q", s.State)
	}
	for _, f := range []string{"plain", "ansi", "tmux", "polybar", "waybar", "i3blocks", "swiftbar", "json"} {
		out, code := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", f)
		if code != 0 || !strings.Contains(out, "stopped") {
			t.Fatalf("memd status --format %s after the stop: exit %d %q", f, code, out)
		}
	}
	out, _ := w.memd("status", "--config", w.config, "--repo", w.repo)
	if !strings.HasPrefix(out, "memd: stopped · ") {
		t.Fatalf("plain: %q", out)
	}
}
