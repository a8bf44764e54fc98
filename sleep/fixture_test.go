package sleep

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// fixNow is the clock of every fixture run: 2026-11-30 03:00 UTC, so keep_years 1 archives
// 2024 and earlier.
var fixNow = time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)

// mem describes one memory file of a fixture.
type mem struct {
	typ, status         string
	created, updated    string
	title, gist         string
	event               string // <time datetime>, optional
	entities, tags      []string
	links               []string // hrefs (memhtml-relates-to)
	validUntil, taskSts string
}

func (m mem) html() string {
	if m.status == "" {
		m.status = "active"
	}
	if m.created == "" {
		m.created = "2025-01-01T00:00:00Z"
	}
	if m.updated == "" {
		m.updated = m.created
	}
	if m.title == "" {
		m.title = "A memory"
	}
	if m.gist == "" {
		m.gist = m.title + " happened"
	}
	var b strings.Builder
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", html.EscapeString(m.title))
	meta := func(n, v string) { fmt.Fprintf(&b, "<meta name=\"%s\" content=\"%s\">\n", n, html.EscapeString(v)) }
	meta("memhtml-type", m.typ)
	meta("memhtml-status", m.status)
	meta("memhtml-created", m.created)
	meta("memhtml-updated", m.updated)
	if m.validUntil != "" {
		meta("memhtml-valid-until", m.validUntil)
	}
	if m.taskSts != "" {
		meta("memhtml-task-status", m.taskSts)
	}
	for _, e := range m.entities {
		meta("memhtml-entity", e)
	}
	for _, t := range m.tags {
		meta("memhtml-tag", t)
	}
	for _, l := range m.links {
		fmt.Fprintf(&b, "<link rel=\"memhtml-relates-to\" href=\"%s\">\n", l)
	}
	b.WriteString("</head>\n<body>\n<article>\n<p><mark>" + html.EscapeString(m.gist) + "</mark>")
	if m.event != "" {
		fmt.Fprintf(&b, " on <time datetime=\"%s\">%s</time>", m.event, m.event)
	}
	b.WriteString(".</p>\n</article>\n</body>\n</html>\n")
	return b.String()
}

func readFile(t testing.TB, root, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(root, rel string) bool {
	_, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

// initRepo makes dir a git repo on main with everything in it committed by git.
func initRepo(t testing.TB, dir string) {
	t.Helper()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "initial")
}

func openStore(t testing.TB, dir string) *gitrepo.Repo {
	t.Helper()
	r, err := gitrepo.Open(dir, gitrepo.Options{Author: gitrepo.Author{Name: "memd", Email: "memd@test"},
		Now: func() time.Time { return fixNow }, Hostname: "testhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.WaitIndexRefresh(); r.Close() })
	return r
}

func testConfig() memd.Config {
	c := memd.DefaultConfig()
	c.Arcs.Summarizer.Timeout = memd.Duration(5 * time.Second)
	return c
}

func runSleep(t testing.TB, dir string, store Store, cfg memd.Config, mutate func(*Options)) Report {
	t.Helper()
	opts := Options{Config: cfg, Now: func() time.Time { return fixNow }, NoGC: true}
	if mutate != nil {
		mutate(&opts)
	}
	rep, err := NewRunner(dir, store, opts).Run(context.Background(), RunID(fixNow))
	if err != nil {
		t.Fatalf("sleep run: %v", err)
	}
	return rep
}

func head(t testing.TB, dir string) string {
	return strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))
}

// treeDigest hashes every file (path + bytes) under dir except .git: two trees with the
// same digest hold the same files with the same bytes.
func treeDigest(t testing.TB, dir string) string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func treeList(t testing.TB, dir string) []string {
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(paths)
	return paths
}

// Fixture paths.
const (
	epOld1    = "areas/oncall/20240310-rollback.html"
	epOld2    = "areas/oncall/20240512-pager-storm.html"
	epOld3    = "areas/oncall/20240901-db-failover.html"
	epNew1    = "projects/shop/20250203-checkout-outage.html"
	epNew2    = "projects/shop/20250610-checkout-fix.html"
	epNew3    = "projects/shop/20251020-checkout-review.html"
	epSvc1    = "projects/shop/20250301-api-latency.html"
	epSvc2    = "projects/shop/20250401-api-timeout.html"
	epThis    = "areas/oncall/20261101-drill.html"
	noteFile  = "resources/go/notes.html"
	personF   = "resources/people/sanju-rao.html"
	semOld    = "resources/go/gc-tuning.html"
	semArch   = "resources/go/old-flags.html"
	taskDone  = "projects/shop/tasks/fix-cart.html"
	taskFresh = "projects/shop/tasks/fix-cache.html"
	taskOpen  = "projects/shop/tasks/write-docs.html"
	oldArc    = "areas/arcs/legacy-2020.html"
	expiredF  = "areas/inbox/trial-flag.html"
	validF    = "areas/inbox/flag-still-valid.html"
	indexMD   = "MEMORY.md"
	projectMD = "projects/shop/MEMORY.md"
)

const sanju = "person:Sanju Rao"

// buildFixture writes a repo spanning 2020..2026 with one case for each rule and commits it.
func buildFixture(t testing.TB, dir string) {
	t.Helper()
	files := map[string]mem{
		epOld1: {typ: "episodic", title: "Rollback", entities: []string{sanju}, created: "2024-03-10T10:00:00Z"},
		epOld2: {typ: "episodic", title: "Pager storm", entities: []string{sanju}, created: "2024-05-12T10:00:00Z"},
		epOld3: {typ: "episodic", title: "DB failover", entities: []string{sanju, "service:db"}, created: "2024-09-01T10:00:00Z",
			links: []string{"/" + epOld1}},
		epNew1:    {typ: "episodic", title: "Checkout outage", entities: []string{sanju}, created: "2025-02-03T10:00:00Z"},
		epNew2:    {typ: "episodic", title: "Checkout fix", entities: []string{sanju}, created: "2025-06-10T10:00:00Z"},
		epNew3:    {typ: "episodic", title: "Checkout review", entities: []string{sanju}, created: "2025-10-20T10:00:00Z"},
		epSvc1:    {typ: "episodic", title: "API latency", entities: []string{"service:checkout-api"}, created: "2025-03-01T10:00:00Z"},
		epSvc2:    {typ: "episodic", title: "API timeout", entities: []string{"service:checkout-api"}, created: "2025-04-01T10:00:00Z"},
		epThis:    {typ: "episodic", title: "Drill", entities: []string{"service:db"}, created: "2026-11-01T10:00:00Z"},
		noteFile:  {typ: "semantic", title: "Go notes", tags: []string{"go"}, created: "2023-01-01T00:00:00Z", links: []string{"/" + epOld1, "/" + epOld2, "/" + epNew1}},
		personF:   {typ: "semantic", title: "Sanju Rao", entities: []string{sanju}, created: "2020-01-01T00:00:00Z"},
		semOld:    {typ: "semantic", title: "GC tuning", created: "2020-06-01T00:00:00Z", event: "2020-06-01"},
		semArch:   {typ: "semantic", status: "archived", title: "Old flags", created: "2025-06-01T00:00:00Z"},
		taskDone:  {typ: "task", taskSts: "done", title: "Fix cart", created: "2026-08-01T00:00:00Z", updated: "2026-09-01T00:00:00Z"},
		taskFresh: {typ: "task", taskSts: "done", title: "Fix cache", created: "2026-11-01T00:00:00Z", updated: "2026-11-20T00:00:00Z"},
		taskOpen:  {typ: "task", taskSts: "doing", title: "Write docs", created: "2024-01-01T00:00:00Z", updated: "2024-01-01T00:00:00Z"},
		oldArc:    {typ: "arc", title: "legacy in 2020", entities: []string{"legacy"}, created: "2020-01-01T00:00:00Z"},
		expiredF:  {typ: "semantic", title: "Trial flag", created: "2026-01-01T00:00:00Z", validUntil: "2026-10-01T00:00:00Z"},
		validF:    {typ: "semantic", title: "Flag still valid", created: "2026-01-01T00:00:00Z", validUntil: "2026-11-20T00:00:00Z"},
	}
	for p, m := range files {
		testutil.WriteFile(t, dir, p, m.html())
	}
	testutil.WriteFile(t, dir, indexMD, "# MEMORY\n\n"+
		"- [["+epOld1+"|Rollback]] \u00b7 type:episodic subject:oncall \u00b7 the rollback\n"+
		"- [["+epNew1+"|Checkout outage]] \u00b7 type:episodic subject:shop \u00b7 outage\n"+
		"- [["+semArch+"|Old flags]] \u00b7 type:semantic subject:go \u00b7 flags\n")
	testutil.WriteFile(t, dir, projectMD, "# shop\n\n## Active Warnings\n- cart is flaky\n\n## CRITICAL RULES\n- never force-push\n\n## Notes\n- misc\n")
	testutil.WriteFile(t, dir, "memory.jsonl", strings.Join([]string{
		`{"id":"r1","type":"rule","role":"dev","text":"rule","createdAt":"2020-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2021-01-01T00:00:00Z"}}`,
		`{"id":"l1","type":"lesson","role":"dev","text":"lesson","createdAt":"2020-01-01T00:00:00Z"}`,
		`{"id":"p1","type":"note","role":"dev","text":"persistent","createdAt":"2020-01-01T00:00:00Z","lifecycle":{"mode":"persistent"}}`,
		`{"id":"h-past","type":"note","role":"dev","text":"hard past","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2025-12-31T23:59:59Z"},"x-keep":{"a":[1,2]}}`,
		`{"id":"h-future","type":"note","role":"dev","text":"hard future","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-11-30T03:00:01Z"}}`,
		`{"id":"h-exact","type":"note","role":"dev","text":"hard exactly now","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-11-30T03:00:00Z"}}`,
		`{"id":"s-grace","type":"note","role":"dev","text":"soft, within grace","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"soft-expiry","expiresAt":"2026-11-20T00:00:00Z"}}`,
		`{"id":"s-drain","type":"note","role":"dev","text":"soft, grace over","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"soft-expiry","expiresAt":"2026-11-01T00:00:00Z"}}`,
		`{"id":"s-future","type":"note","role":"dev","text":"soft future","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"soft-expiry","expiresAt":"2027-01-01T00:00:00Z"}}`,
		`{"id":"rc0","type":"note","role":"dev","text":"read out","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"read-count","remainingReads":0}}`,
		`{"id":"rc1","type":"note","role":"dev","text":"one read left","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"read-count","remainingReads":1}}`,
		`{this line is broken`,
	}, "\n")+"\n")
	testutil.WriteFile(t, dir, "areas/inbox/.gitkeep", "")
	initRepo(t, dir)
}

// commitsSince lists the commit messages after base, newest first.
func commitsSince(t testing.TB, dir, base string) []string {
	out := testutil.RunGit(t, dir, "log", "--format=%B%x00", base+"..HEAD")
	var msgs []string
	for _, m := range strings.Split(out, "\x00") {
		if m = strings.TrimSpace(m); m != "" {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

func phaseCommit(t testing.TB, dir, phase string) string {
	return strings.TrimSpace(testutil.RunGit(t, dir, "log", "-1", "--format=%H", "--grep=^sleep("+phase+")"))
}

func mustContain(t testing.TB, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("%s: want %q in:\n%s", what, sub, s)
	}
}

func mustNotContain(t testing.TB, what, s, sub string) {
	t.Helper()
	if strings.Contains(s, sub) {
		t.Errorf("%s: did not want %q in:\n%s", what, sub, s)
	}
}

var _ = bytes.Equal

func openStoreErr(dir string) (*gitrepo.Repo, error) {
	return gitrepo.Open(dir, gitrepo.Options{Author: gitrepo.Author{Name: "memd", Email: "memd@test"},
		Now: func() time.Time { return fixNow }, Hostname: "testhost"})
}
