package reliability

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// episode is a valid memhtml episodic memory with the given links in its head.
func episode(title, date string, links ...string) string {
	var l strings.Builder
	for _, h := range links {
		fmt.Fprintf(&l, "<link rel=\"memhtml-part-of\" href=\"%s\">\n", h)
	}
	return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>` + title + `</title>
<meta name="memhtml-type" content="episodic">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="` + date + `T10:00:00Z">
<meta name="memhtml-updated" content="` + date + `T10:00:00Z">
<meta name="memhtml-entity" content="person:Hostile Input">
` + l.String() + `</head>
<body>
<article>
<p><mark>` + title + `.</mark> On <time datetime="` + date + `">that day</time>.</p>
</article>
</body>
</html>
`
}

// snapshotDir lists every entry under dir with its mode, size and content hash (links by
// target) so a test can see that nothing outside the repo was written.
func snapshotDir(t testing.TB, dir string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			v += " -> " + tgt
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[p] = v
		return nil
	})
	must(t, err)
	return out
}

// TestReliabilityHostileTree runs memd run, doctor and sleep over a tree full of hostile
// input. Each must finish (no hang: the FIFO is never opened for reading), not crash, keep
// everything (names with newlines and invalid UTF-8, a 100 MB sparse file, broken ledger
// lines, a 1 MB MEMORY.md), commit symlinks as links and never follow them out of the repo,
// and neither read nor write anything outside the repo.
func TestReliabilityHostileTree(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{demo: true, config: `watch: {quiet: 150ms, max_delay: 1s}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`})
	secret := fmt.Sprintf("OUTSIDE-SECRET-%d", time.Now().UnixNano())
	outside := filepath.Join(w.home, "outside")
	must(t, os.MkdirAll(filepath.Join(outside, "dir"), 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret.html"), []byte(episode(secret, "2020-01-01")), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "dir", "MEMORY.md"), []byte("# outside\n- "+secret+"\n"), 0o644))
	slashes := strings.Repeat("/", 64<<10)

	// What must survive, by path: the exact bytes written (checked in HEAD at the end,
	// except for files sleep may legitimately edit, which are checked by lines).
	exact := map[string]string{}
	put := func(rel, c string) {
		w.write(rel, c)
		exact[rel] = c
	}
	put("areas/oncall/20200105-traversal.html", episode("Traversal", "2020-01-05",
		"/../../outside/secret.html", "../../../../../../etc/passwd", "/areas/../../outside/dir/MEMORY.md", slashes+"areas/x.html",
		"file:///etc/passwd", "http://127.0.0.1:1/x.html"))
	put("areas/oncall/20200106-slashes.html", episode("Slashes", "2020-01-06", slashes))
	put("areas/inbox/new\nline.html", episode("Newline name", "2026-02-01"))
	put("areas/inbox/bad-\xff\xfe-utf8.html", episode("Invalid UTF-8 \xff name", "2026-02-02"))
	put("areas/inbox/20200107-malformed.html", "<html><head><meta name=memhtml-type content=episodic><title>unclosed <article><p><mark>never closed"+
		"\x00\x01\x02 <link rel=memhtml-part-of href=\"/../../../outside/secret.html\"> <script>alert(1)</script>")
	put("areas/inbox/20200108-empty.html", "")
	put("areas/inbox/20200109-binary.html", string([]byte{0xff, 0xd8, 0xff, 0xe0, 0, 0, 0x10, 'J', 'F', 'I', 'F', 0}))
	// Index bullets: traversal, 64 KB of slashes, and enough padding for a 1 MB MEMORY.md.
	idx := w.path("MEMORY.md")
	orig, err := os.ReadFile(idx)
	must(t, err)
	var extra strings.Builder
	extra.WriteString("- [[../../outside/secret.html|traversal]] · type:semantic subject:x · up and out\n")
	extra.WriteString("- [[/../outside/dir/MEMORY.md|rooted traversal]] · type:semantic subject:x · up and out\n")
	extra.WriteString("- [[" + slashes + "|slashes]] · type:semantic subject:x · 64 KB of slashes\n")
	extra.WriteString("- [[areas/inbox/new\n")
	extra.WriteString("broken bullet ]] · · ·\n")
	for extra.Len() < 1<<20 {
		fmt.Fprintf(&extra, "- [[resources/none/gone-%06d.html|gone %d]] · type:semantic subject:pad · a dangling bullet to make the file 1 MB\n", extra.Len(), extra.Len())
	}
	w.write("MEMORY.md", string(orig)+extra.String())
	extraLines := strings.Split(strings.TrimSuffix(extra.String(), "\n"), "\n")
	// A project MEMORY.md of 1 MB that is not in the template (tidy repairs it, losing no line).
	var proj strings.Builder
	proj.WriteString("# big\n\n## Random section\n")
	for proj.Len() < 1<<20 {
		fmt.Fprintf(&proj, "- fact %d: %s\n", proj.Len(), strings.Repeat("z", 80))
	}
	w.write("projects/big/MEMORY.md", proj.String())
	// Ledger: good records and broken lines.
	ledger, err := os.ReadFile(w.path("memory.jsonl"))
	must(t, err)
	broken := []string{`{not json`, "\x00\x01\x02", `{"id":"x","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"not a date"}}`,
		`{"id":"y","type":"note","lifecycle":"persistent"}`, `[1,2,3]`, `"just a string"`, `{"id":` + `"` + strings.Repeat("q", 100000) + `"}`}
	w.write("memory.jsonl", string(ledger)+strings.Join(broken, "\n")+"\n")
	// A 100 MB sparse file.
	big := w.path("resources/big/huge.bin")
	must(t, os.MkdirAll(filepath.Dir(big), 0o755))
	must(t, os.WriteFile(big, nil, 0o644))
	must(t, os.Truncate(big, 100<<20))
	// Symlinks: loops, out of the repo (absolute and relative, to a file and a directory).
	links := map[string]string{
		"areas/loop-self.html":   "loop-self.html",
		"areas/loop-a.html":      "loop-b.html",
		"areas/loop-b.html":      "loop-a.html",
		"areas/loopdir":          ".",
		"resources/out-abs.html": filepath.Join(outside, "secret.html"),
		"resources/out-rel.html": "../../outside/secret.html",
		"resources/outdir":       "../../outside/dir",
		"projects/outdir":        outside,
	}
	for rel, tgt := range links {
		must(t, os.Symlink(tgt, w.path(rel)))
	}
	// FIFOs: memd must never open one for reading (it would block forever).
	for _, rel := range []string{"areas/inbox/fifo.html", "projects/big/MEMORY.md.fifo", "areas/fifo-dir/memory.jsonl"} {
		must(t, os.MkdirAll(filepath.Dir(w.path(rel)), 0o755))
		must(t, syscall.Mkfifo(w.path(rel), 0o644))
	}
	before := snapshotDir(t, outside)

	var problems []string
	check := func(what, out string, code int, okCodes ...int) {
		if strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ") {
			problems = append(problems, fmt.Sprintf("%s crashed:\n%.3000s", what, out))
		}
		for _, c := range okCodes {
			if code == c {
				return
			}
		}
		problems = append(problems, fmt.Sprintf("%s: exit %d (want %v):\n%.3000s", what, code, okCodes, out))
	}

	// memd run commits everything (the FIFOs are not files git can hold; they are skipped).
	d := w.start()
	if ok, why := w.settled(2 * settleTimeout); !ok {
		problems = append(problems, "memd run over the hostile tree never settled: "+why)
	}
	if code, body, err := d.Get("/healthz"); err != nil || code != 200 {
		problems = append(problems, fmt.Sprintf("/healthz: %d %v %s", code, err, body))
	}
	check("memd run (SIGTERM)", d.Logs(), d.Stop(), 0)

	out, code := w.memdEnv(nil, 3*time.Minute, "doctor", "--config", w.config, "--repo", w.repo)
	check("memd doctor", out, code, 0, 1)
	doctorOut := out
	out, code = w.memdEnv(nil, 3*time.Minute, "doctor", "--json", "--config", w.config, "--repo", w.repo)
	check("memd doctor --json", out, code, 0, 1)
	out, code = w.memdEnv(nil, 3*time.Minute, "sleep", "--dry-run", "--now", sleepNow, "--config", w.config, "--repo", w.repo)
	check("memd sleep --dry-run", out, code, 0, 1)
	out, code = w.memdEnv(nil, 3*time.Minute, "sleep", "--now", sleepNow, "--config", w.config, "--repo", w.repo)
	check("memd sleep", out, code, 0, 1)
	sleepOut := out
	// And memd run again after the sleep: still fine.
	d = w.start()
	if ok, why := w.settled(2 * settleTimeout); !ok {
		problems = append(problems, "memd run after the sleep never settled: "+why)
	}
	check("memd run after sleep (SIGTERM)", d.Logs(), d.Stop(), 0)

	// Nothing outside the repo was written.
	after := snapshotDir(t, outside)
	for p, v := range before {
		if after[p] != v {
			problems = append(problems, fmt.Sprintf("outside the repo, %s changed: %s -> %s", p, v, after[p]))
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			problems = append(problems, "outside the repo, new entry "+p)
		}
	}
	// Nothing outside the repo was read in as content: the secret is in no object.
	if out, err := w.gitRun(w.repo, nil, "log", "--all", "-a", "--format=%H", "-S", secret); err != nil || strings.TrimSpace(out) != "" {
		problems = append(problems, fmt.Sprintf("the outside secret is in the history (commits %q, %v)", out, err))
	}
	for _, o := range []string{doctorOut, sleepOut} {
		if strings.Contains(o, secret) {
			problems = append(problems, "a report printed the outside secret")
		}
	}
	// Everything kept: exact files (where sleep did not move them), links as links.
	tree := w.git("ls-tree", "-r", "-z", "--full-tree", "HEAD")
	entries := map[string]string{}
	for _, e := range strings.Split(tree, "\x00") {
		meta, p, ok := strings.Cut(e, "\t")
		if ok {
			entries[p] = meta
		}
	}
	for rel, c := range exact {
		found := ""
		for _, cand := range []string{rel, "archive/2020/" + rel, "archive/2026/" + rel} { // 2026: the run's year (memhtml's archive rule)
			if _, ok := entries[cand]; ok {
				found = cand
			}
		}
		if found == "" {
			problems = append(problems, fmt.Sprintf("%q is not in HEAD (nor archived)", rel))
			continue
		}
		// By hash: a name with a newline cannot go through cat-file --batch's line protocol.
		f := strings.Fields(entries[found])
		got := w.blobs(w.repo, []string{f[2]})[f[2]]
		if found == rel && got != c && !strings.HasPrefix(rel, "areas/oncall/") {
			problems = append(problems, fmt.Sprintf("%q changed in HEAD", rel))
		}
		if strings.Contains(got, secret) {
			problems = append(problems, fmt.Sprintf("%q now holds the outside secret", found))
		}
	}
	for rel, tgt := range links {
		meta, ok := entries[rel]
		if !ok || !strings.HasPrefix(meta, "120000 ") {
			problems = append(problems, fmt.Sprintf("symlink %s not committed as a link (%q)", rel, meta))
			continue
		}
		if got := w.blobs(w.repo, []string{"HEAD:" + rel})["HEAD:"+rel]; got != tgt {
			problems = append(problems, fmt.Sprintf("symlink %s committed as %q, want %q", rel, got, tgt))
		}
	}
	for p := range entries {
		if strings.HasPrefix(p, "resources/outdir/") || strings.HasPrefix(p, "projects/outdir/") || strings.HasPrefix(p, "areas/loopdir/") {
			problems = append(problems, "committed a path through a directory symlink: "+p)
		}
		if strings.Contains(p, "fifo") {
			problems = append(problems, "committed a FIFO: "+p)
		}
	}
	if sz, err := w.gitRun(w.repo, nil, "cat-file", "-s", "HEAD:resources/big/huge.bin"); err != nil || strings.TrimSpace(sz) != fmt.Sprint(100<<20) {
		problems = append(problems, fmt.Sprintf("the 100 MB file is not committed whole: %q %v", sz, err))
	}
	// Broken ledger lines are kept verbatim; the 1 MB index keeps every added line.
	headLedger := w.blobs(w.repo, []string{"HEAD:memory.jsonl"})["HEAD:memory.jsonl"]
	for _, b := range broken {
		if !strings.Contains(headLedger, b+"\n") {
			problems = append(problems, fmt.Sprintf("ledger line lost: %.60q", b))
		}
	}
	headIdx := w.blobs(w.repo, []string{"HEAD:MEMORY.md"})["HEAD:MEMORY.md"]
	lost := 0
	for _, l := range extraLines {
		if !strings.Contains(headIdx, l) {
			lost++
		}
	}
	if lost > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d added MEMORY.md lines lost", lost, len(extraLines)))
	}
	headProj := w.blobs(w.repo, []string{"HEAD:projects/big/MEMORY.md"})["HEAD:projects/big/MEMORY.md"]
	for _, l := range strings.Split(strings.TrimSuffix(proj.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "- fact ") && !strings.Contains(headProj, l+"\n") {
			problems = append(problems, "project MEMORY.md line lost by tidy: "+l[:30])
			break
		}
	}
	if s := w.fsck(w.repo); s != "" {
		problems = append(problems, "git fsck: "+s)
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	writes := len(exact) + len(links) + len(broken) + len(extraLines) + 2
	found := writes
	if len(problems) > 0 {
		found = 0
	}
	record(t, row{Scenario: "hostile tree: run, doctor, sleep", Iterations: 1, Writes: writes, Found: found,
		Corruptions: len(problems), Time: time.Since(start),
		Note: "traversal hrefs+bullets, 64 KB slashes, newline and invalid-UTF-8 names, 100 MB sparse, symlink loops and escapes, 3 FIFOs, malformed HTML, broken ledger lines, 1 MB MEMORY.md x2"})
}
