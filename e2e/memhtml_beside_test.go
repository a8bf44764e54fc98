package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/treemerge"
)

// besideNow is the clock of memd's sleeps here: 2023's episode is past archive.keep_years.
const besideNow = "2026-12-02T03:00:00Z"

// memhtmlWorld is a world whose repo memhtml made (`memhtml init`), with the real memhtml CLI.
type memhtmlWorld struct {
	*world
	mh testutil.Memhtml
}

// newMemhtmlWorld makes a home whose ~/memory is either memhtml's own `init` (clone == "") or
// a clone of that remote.
func newMemhtmlWorld(t *testing.T, mh testutil.Memhtml, remote, clone string) *memhtmlWorld {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = testutil.IsolatedEnv(home, gitconfig)
	mw := &memhtmlWorld{world: w, mh: mh}
	if clone != "" {
		if out, err := exec.Command("git", "clone", "-q", clone, w.repo).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v\n%s", err, out)
		}
		return mw
	}
	if err := os.MkdirAll(w.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	mw.do("init")
	w.git("remote", "add", "origin", remote)
	return mw
}

// do runs memhtml in the world's repo as an agent would (its own git identity) and decodes
// its envelope's data into v (nil: ignore it); a failure is fatal.
func (mw *memhtmlWorld) do(args ...string) json.RawMessage {
	mw.t.Helper()
	out, code := mw.try(args...)
	if code != 0 {
		mw.t.Fatalf("memhtml %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(out, &env); err != nil {
		mw.t.Fatalf("memhtml %s: not an envelope: %v\n%s", strings.Join(args, " "), err, out)
	}
	return env.Data
}

// try runs memhtml and returns its stdout and exit code.
func (mw *memhtmlWorld) try(args ...string) ([]byte, int) {
	mw.t.Helper()
	cmd := mw.mh.Command(mw.repo, args...)
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com", "GIT_CONFIG_GLOBAL="+filepath.Join(mw.home, "gitconfig"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return append(out, []byte("\n"+lastLines(stderr.String(), 15))...), ee.ExitCode()
	} else if err != nil {
		mw.t.Fatalf("memhtml %s: %v", strings.Join(args, " "), err)
	}
	return out, 0
}

// sleepFailure is what a refused memhtml sleep said: its error and code, or the phases of
// its report that did not end ok.
func sleepFailure(out []byte) string {
	var env struct {
		Error string `json:"error"`
		Code  string `json:"code"`
		Data  struct {
			Phases []json.RawMessage `json:"phases"`
		} `json:"data"`
	}
	if json.Unmarshal(out, &env) != nil {
		return string(out)
	}
	msg := env.Code + " " + env.Error
	for _, p := range env.Data.Phases {
		if !strings.Contains(string(p), `"status":"ok"`) && !strings.Contains(string(p), `"status": "ok"`) {
			msg += "\n" + string(p)
		}
	}
	return msg
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %T: %v\n%s", v, err, raw)
	}
	return v
}

// episodeOp is one `memhtml apply` line: an episode of entity on day (its <time>).
func episodeOp(title, entity, day string) string {
	b, _ := json.Marshal(map[string]any{"op": "write", "type": "episodic", "workspace": "team", "title": title,
		"entity": entity, "article_html": fmt.Sprintf(`<p><mark>%s, with %s.</mark> On <time datetime="%s">%s</time>.</p>`, title, entity, day, day)})
	return string(b)
}

// TestMemhtmlBesideMemd runs memd beside memhtml's own tools on one repo, as a memhtml user
// would, sharing one corpus (written through `memhtml apply`) and one install across steps:
// memd's arcs group entities as memhtml matches them, leave curated arcs alone, list only what
// memhtml indexes and are walked by `memhtml neighbors`; what memd archives reads as archived
// and resolves; memhtml's sleep runs and merges under `memd run`; the access sidecar of two
// clones merges to its maxima; both clones end clean for memhtml.
func TestMemhtmlBesideMemd(t *testing.T) {
	mh := testutil.InstallMemhtml(t)
	remote := filepath.Join(t.TempDir(), "remote.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", "-b", "main", remote).CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v\n%s", err, out)
	}
	a := newMemhtmlWorld(t, mh, remote, "")
	alice := []string{"person:Alice Chen", "person:alice chen", "person:ALICE  CHEN", "person:Alice Chen"}
	var ops []string
	for i, e := range alice {
		ops = append(ops, episodeOp(fmt.Sprintf("Alice episode %d", i+1), e, fmt.Sprintf("2025-0%d-0%d", i+3, i+3)))
	}
	for i := range 3 {
		ops = append(ops, episodeOp(fmt.Sprintf("Bob episode %d", i+1), "person:Bob Stone", fmt.Sprintf("2025-0%d-1%d", i+3, i+1)))
	}
	ops = append(ops, episodeOp("Legacy cutover", "service:legacy", "2023-02-02"))
	if err := os.WriteFile(filepath.Join(a.home, "ops.jsonl"), []byte(strings.Join(ops, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	applied := decode[struct {
		Results []struct {
			OK   bool   `json:"ok"`
			Path string `json:"path"`
		} `json:"results"`
	}](t, a.do("apply", "--file", filepath.Join(a.home, "ops.jsonl")))
	var paths []string
	for _, r := range applied.Results {
		if !r.OK {
			t.Fatalf("memhtml apply: %+v", applied.Results)
		}
		paths = append(paths, r.Path)
	}
	aliceEps, legacy := paths[:4], paths[7]
	// A curated arc at the very path memd would give Bob's 2025 arc.
	curated := memd.ArcsDir + "/person-bob-stone-2025.html"
	a.do("write", "--type", "arc", "--title", "Bob Stone in 2025", "--entity", "person:Bob Stone", "--path", curated,
		"--article-html", `<p><mark>Bob carried the 2025 migration alone.</mark></p>`)
	curatedBytes := a.read(curated)
	// An Alice episode written by hand with a <time> memhtml refuses (a UTC offset).
	offset := "projects/team/20250610-offset-standup.html"
	offsetHTML := strings.NewReplacer("Alice episode 1", "Offset standup", "2025-03-03", "2025-06-10T10:00:00+02:00").Replace(a.read(aliceEps[0]))
	// Its article changed: drop the (optional) content hash rather than state a wrong one.
	offsetHTML = regexp.MustCompile(`<meta name="memhtml-content-hash"[^>]*>\n`).ReplaceAllString(offsetHTML, "")
	a.write(offset, offsetHTML)
	a.git("add", "-A")
	a.git("-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-qm", "an episode by hand")
	a.git("push", "-q", "-u", "origin", "main")

	if out, code := a.memd("sleep", "--config", a.config, "--now", besideNow); code != 0 {
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	arc := memd.ArcsDir + "/person-alice-chen-2025.html"

	t.Run("arcs", func(t *testing.T) {
		got := a.read(arc)
		for _, p := range aliceEps {
			if !strings.Contains(got, `href="/`+p+`"`) {
				t.Errorf("the arc lacks %s (its entity is spelled %q there)", p, alice[slices.Index(aliceEps, p)])
			}
			if !strings.Contains(a.read(p), `<link rel="memhtml-part-of" href="/`+arc+`">`) {
				t.Errorf("%s has no memhtml-part-of link to its arc", p)
			}
		}
		if strings.Contains(got, offset) {
			t.Errorf("the arc lists %s, which memhtml cannot index", offset)
		}
		if !strings.Contains(got, "in 2025: 4 episodes, 2025-03-03 to 2025-06-06.") {
			t.Errorf("arc claim:\n%s", got)
		}
		if a.read(curated) != curatedBytes {
			t.Errorf("memd rewrote the curated arc:\n%s", a.read(curated))
		}
	})

	archived := "archive/2026/" + legacy
	t.Run("graph and archive", func(t *testing.T) {
		rep := decode[rebuildReport](t, a.do("index", "rebuild"))
		if len(rep.Skipped) != 1 || rep.Skipped[0].Path != offset {
			t.Errorf("memhtml skipped %+v, want only %s", rep.Skipped, offset)
		}
		type nb struct {
			Nodes []struct{ Path, Rel string } `json:"nodes"`
		}
		var wg sync.WaitGroup
		var fromArc, fromMember nb
		type readView struct {
			Archived bool `json:"archived"`
		}
		var read readView
		var resolved struct {
			Path       string `json:"path"`
			StopReason string `json:"stopReason"`
		}
		for _, f := range []func(){
			func() { fromArc = decode[nb](t, a.do("neighbors", arc)) },
			func() { fromMember = decode[nb](t, a.do("neighbors", aliceEps[1])) },
			func() { read = decode[readView](t, a.do("read", archived)) },
			func() {
				resolved = decode[struct {
					Path       string `json:"path"`
					StopReason string `json:"stopReason"`
				}](t, a.do("resolve", legacy))
			},
		} {
			wg.Go(f)
		}
		wg.Wait()
		var members []string
		for _, n := range fromArc.Nodes {
			if n.Rel == "part_of" {
				members = append(members, n.Path)
			}
		}
		slices.Sort(members)
		if want := slices.Sorted(slices.Values(aliceEps)); !slices.Equal(members, want) {
			t.Errorf("memhtml neighbors %s: part_of nodes %v, want %v", arc, members, want)
		}
		if !slices.ContainsFunc(fromMember.Nodes, func(n struct{ Path, Rel string }) bool { return n.Path == arc }) {
			t.Errorf("memhtml neighbors %s does not reach the arc: %+v", aliceEps[1], fromMember.Nodes)
		}
		if !read.Archived {
			t.Errorf("memhtml read %s: not archived", archived)
		}
		if resolved.Path != archived || resolved.StopReason != "archived" {
			t.Errorf("memhtml resolve %s: %+v", legacy, resolved)
		}
	})

	// The user fixes the refused episode; memhtml's sleep needs a clean tree.
	a.write(offset, strings.ReplaceAll(offsetHTML, "2025-06-10T10:00:00+02:00", "2025-06-10T08:00:00Z"))
	a.git("-c", "user.name=u", "-c", "user.email=u@example.com", "commit", "-qam", "fix the time")
	a.git("push", "-q", "origin", "main")

	t.Run("memhtml sleep under memd run", func(t *testing.T) {
		d := a.start()
		// memd stands aside while HEAD is on memhtml's sleep/<date> review branch (docs/ARCHITECTURE.md §11):
		// memhtml's run commits there alone and its merge finds main where it left it.
		refused := func(what string, out []byte) {
			d.Stop()
			if cur := strings.TrimSpace(a.git("rev-parse", "--abbrev-ref", "HEAD")); cur != "main" {
				a.git("checkout", "-q", "-f", "main")
			}
			t.Fatalf("%s refused beside memd run:\n%s", what, sleepFailure(out))
		}
		out, code := a.try("sleep", "run")
		if code != 0 {
			refused("memhtml sleep run", out)
		}
		var run struct {
			Data struct {
				RunID string `json:"runId"`
			} `json:"data"`
		}
		if err := json.Unmarshal(out, &run); err != nil {
			t.Fatalf("memhtml sleep run: %v\n%s", err, out)
		}
		out, code = a.try("sleep", "merge", run.Data.RunID)
		if code != 0 {
			refused("memhtml sleep merge "+run.Data.RunID, out)
		}
		head := strings.TrimSpace(a.git("rev-parse", "HEAD"))
		testutil.WaitFor(t, "memd to push memhtml's merged sleep", commitTimeout, func() bool {
			r, err := testutil.Git{Env: a.env}.Run(remote, nil, "rev-parse", "main")
			return err == nil && strings.TrimSpace(r) == head
		}, d.Describe)
		d.Stop()
	})

	// memhtml's sleep added its own lines to memd's arc (person links, confidence). A member
	// change (the fixed episode joins, a new one is written) rewrites the arc and keeps them.
	before := memfile.HeadLines([]byte(a.read(arc)))
	a.do("write", "--type", "episodic", "--workspace", "team", "--title", "Alice episode 5", "--entity", "person:Alice Chen",
		"--article-html", `<p><mark>Alice closed the year.</mark> On <time datetime="2025-11-11">November 11</time>.</p>`)
	// The next night (another run id: a run id sleeps once).
	if out, code := a.memd("sleep", "--config", a.config, "--now", "2026-12-03T03:00:00Z"); code != 0 {
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	t.Run("arc rewrite keeps memhtml's additions", func(t *testing.T) {
		got := a.read(arc)
		if !strings.Contains(got, "in 2025: 6 episodes, 2025-03-03 to 2025-11-11.") || !strings.Contains(got, offset) {
			t.Errorf("arc after the member change:\n%s", got)
		}
		after := memfile.HeadLines([]byte(got))
		for _, l := range before {
			keep := l.Link || l.Name == memfile.MetaConfidence
			if keep && !slices.Contains(after, l) {
				t.Errorf("the rewrite dropped %+v:\n%s", l, got)
			}
		}
	})
	if out, code := a.memd("sync", "--config", a.config); code != 0 {
		t.Fatalf("memd sync: exit %d\n%s", code, out)
	}

	b := newMemhtmlWorld(t, mh, remote, remote)
	t.Run("access counts merge to their maxima", func(t *testing.T) {
		checkAccessMerge(t, a, b, paths)
	})

	t.Run("memhtml clean on both clones", func(t *testing.T) {
		var wg sync.WaitGroup
		for _, w := range []*memhtmlWorld{a, b} {
			wg.Go(func() {
				rep := decode[rebuildReport](t, w.do("index", "rebuild"))
				if len(rep.Skipped) > 0 {
					t.Errorf("%s: memhtml skipped %+v", w.repo, rep.Skipped)
				}
				doc := decode[struct {
					Unparseable []any `json:"unparseable"`
					Warnings    []any `json:"warnings"`
				}](t, w.do("doctor"))
				if len(doc.Unparseable) > 0 || len(doc.Warnings) > 0 {
					t.Errorf("%s: memhtml doctor: %+v", w.repo, doc)
				}
			})
		}
		wg.Wait()
		if a.git("rev-parse", "HEAD") != b.git("rev-parse", "HEAD") {
			t.Errorf("the clones end on different commits")
		}
	})
}

// accessRow is the part of a sidecar row the merge is judged on.
type accessRow struct {
	Path               string `json:"path"`
	AccessCount        int    `json:"accessCount"`
	ReinforcementCount int    `json:"reinforcementCount"`
}

func accessRows(t *testing.T, data string) map[string]accessRow {
	t.Helper()
	out := map[string]accessRow{}
	for _, l := range strings.Split(strings.TrimSpace(data), "\n") {
		if l == "" {
			continue
		}
		var r accessRow
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("access.jsonl line %q: %v", l, err)
		}
		out[r.Path] = r
	}
	return out
}

// checkAccessMerge: each clone's state plane holds its own history of the same memories
// (replayed by `memhtml state import`), each reads memories for real, each exports and
// commits its sidecar; after memd syncs both ways the two hold one sidecar with each row's
// maximum, and no conflict copy.
func checkAccessMerge(t *testing.T, a, b *memhtmlWorld, paths []string) {
	history := func(w *memhtmlWorld, counts map[string]int) {
		var lines []string
		for _, p := range slices.Sorted(func(yield func(string) bool) {
			for p := range counts {
				if !yield(p) {
					return
				}
			}
		}) {
			lines = append(lines, fmt.Sprintf(`{"path":%q,"accessCount":%d,"reinforcementCount":%d,"outcomeScore":0,"lastAccessedAt":"2026-11-01T00:00:00Z","lastReinforcedAt":null,"updatedAt":"2026-11-01T00:00:00Z"}`, p, counts[p], counts[p]/2))
		}
		w.write(treemerge.AccessStatePath, strings.Join(lines, "\n")+"\n")
		w.do("state", "import")
	}
	var wg sync.WaitGroup
	for _, side := range []struct {
		w       *memhtmlWorld
		history map[string]int
		reads   []string
	}{
		{a, map[string]int{paths[0]: 7, paths[1]: 2}, []string{paths[2]}},
		{b, map[string]int{paths[0]: 3, paths[1]: 5}, []string{paths[2]}},
	} {
		wg.Go(func() {
			if side.w == b {
				side.w.do("index", "rebuild")
			}
			history(side.w, side.history)
			for _, p := range side.reads {
				side.w.do("read", p)
			}
			side.w.do("state", "export")
		})
	}
	wg.Wait()
	ra, rb := accessRows(t, a.read(treemerge.AccessStatePath)), accessRows(t, b.read(treemerge.AccessStatePath))
	for _, w := range []*memhtmlWorld{a, b, a} {
		if out, code := w.memd("sync", "--config", w.config); code != 0 {
			t.Fatalf("memd sync %s: exit %d\n%s", w.repo, code, out)
		}
	}
	merged := a.read(treemerge.AccessStatePath)
	if got := b.read(treemerge.AccessStatePath); got != merged {
		t.Errorf("the clones hold different sidecars:\n%s\n---\n%s", merged, got)
	}
	got := accessRows(t, merged)
	for _, r := range []map[string]accessRow{ra, rb} {
		for p := range r {
			want := accessRow{Path: p, AccessCount: max(ra[p].AccessCount, rb[p].AccessCount),
				ReinforcementCount: max(ra[p].ReinforcementCount, rb[p].ReinforcementCount)}
			if got[p] != want {
				t.Errorf("merged row %s: %+v, want %+v", p, got[p], want)
			}
		}
	}
	if got[paths[0]].AccessCount != 7 || got[paths[1]].AccessCount != 5 || got[paths[2]].AccessCount < 1 {
		t.Errorf("merged counts %+v", got)
	}
	copies, _ := filepath.Glob(a.path(".memhtml/state/*conflict*"))
	if len(copies) > 0 {
		t.Errorf("conflict copies of the sidecar: %v", copies)
	}
}
