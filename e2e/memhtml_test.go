package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// mhRun runs the real memhtml CLI against repo and decodes its one JSON envelope into data.
// It returns the exit code (-1 when memhtml could not run or answered no envelope, an
// error of the test). Safe to call from several goroutines.
func mhRun(t *testing.T, mh testutil.Memhtml, repo string, data any, args ...string) int {
	t.Helper()
	cmd := mh.Command(repo, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Errorf("memhtml %s: %v", strings.Join(args, " "), err)
		return -1
	}
	if data != nil {
		env := struct {
			Data  json.RawMessage `json:"data"`
			Error string          `json:"error"`
			Code  string          `json:"code"`
		}{}
		if err := json.Unmarshal(out, &env); err != nil {
			t.Errorf("memhtml %s: not a JSON envelope (%v):\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
			return -1
		}
		if code == 0 {
			if err := json.Unmarshal(env.Data, data); err != nil {
				t.Errorf("memhtml %s: data: %v\n%s", strings.Join(args, " "), err, out)
				return -1
			}
		}
	}
	if code != 0 {
		t.Logf("memhtml %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, lastLines(stderr.String(), 10))
	}
	return code
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// rebuildReport is what `memhtml index rebuild` answers.
type rebuildReport struct {
	FilesIndexed int `json:"filesIndexed"`
	Skipped      []struct {
		Path   string `json:"path"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// TestMemhtmlConformance runs the real memhtml (npm memhtml 0.15.1 on Node 24) over what
// the real memd writes: `memd init --demo` + `memd sleep` must give a repo memhtml indexes
// whole (no file skipped, the arcs listed and readable as arcs), and memhtml's databases
// are never committed by `memd sync`, even with a .gitignore that predates memd init.
func TestMemhtmlConformance(t *testing.T) {
	mh := testutil.InstallMemhtml(t)
	home := t.TempDir()
	remote := filepath.Join(home, "remote.git")
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(baseConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = testutil.IsolatedEnv(home, gitconfig)
	if out, err := exec.Command("git", "init", "-q", "--bare", remote).CombinedOutput(); err != nil {
		t.Fatalf("git init --bare: %v\n%s", err, out)
	}
	if out, code := w.memd("init", "--demo", "--remote", remote, "--config", w.config, w.repo); code != 0 {
		t.Fatalf("memd init --demo: exit %d\n%s", code, out)
	}
	if out, code := w.memd("sleep", "--config", w.config); code != 0 {
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	arcs, _ := filepath.Glob(w.path(memd.ArcsDir + "/*.html"))
	if len(arcs) == 0 {
		t.Fatal("memd sleep wrote no arcs on the demo")
	}
	archived := w.git("ls-tree", "-r", "--name-only", "HEAD", "archive/")
	if !strings.Contains(archived, ".html") {
		t.Fatal("memd sleep archived nothing on the demo (the test would not cover moved files)")
	}

	var rep rebuildReport
	if code := mhRun(t, mh, w.repo, &rep, "index", "rebuild"); code != 0 {
		t.Fatalf("memhtml index rebuild failed on a repo memd wrote (exit %d)", code)
	}
	for _, s := range rep.Skipped {
		t.Errorf("memhtml skipped %s: %s", s.Path, s.Reason)
	}
	memories := 0
	for _, p := range strings.Split(w.git("ls-tree", "-r", "--name-only", "HEAD"), "\n") {
		if strings.HasSuffix(p, memd.MemoryExt) && !memd.IsNonMemory(p) {
			memories++
		}
	}
	if rep.FilesIndexed != memories {
		t.Errorf("memhtml indexed %d files, the tree holds %d memories", rep.FilesIndexed, memories)
	}

	// memhtml's own doctor: nothing unparseable, no format warning on any file.
	var doc struct {
		Unparseable []any `json:"unparseable"`
		Warnings    []struct {
			Path     string   `json:"path"`
			Warnings []string `json:"warnings"`
		} `json:"warnings"`
	}
	if code := mhRun(t, mh, w.repo, &doc, "doctor"); code != 0 {
		t.Errorf("memhtml doctor: exit %d", code)
	}
	if len(doc.Unparseable) > 0 || len(doc.Warnings) > 0 {
		t.Errorf("memhtml doctor: unparseable %v, warnings %+v", doc.Unparseable, doc.Warnings)
	}

	var list struct {
		Files []struct {
			Path       string `json:"path"`
			MemoryType string `json:"memoryType"`
		} `json:"files"`
	}
	if code := mhRun(t, mh, w.repo, &list, "list", "--type", "arc", "--limit", "1000"); code != 0 {
		t.Fatalf("memhtml list --type arc: exit %d", code)
	}
	var listed []string
	for _, f := range list.Files {
		listed = append(listed, f.Path)
	}
	for _, a := range arcs {
		if rel := memd.ArcsDir + "/" + filepath.Base(a); !slices.Contains(listed, rel) {
			t.Errorf("memhtml list --type arc lacks %s (listed %d: %v)", rel, len(listed), listed)
		}
	}
	// memhtml read, a few at a time (each is a Node process start: ~1 s).
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, a := range arcs {
		rel := memd.ArcsDir + "/" + filepath.Base(a)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var detail struct {
				Metas    struct{ MemoryType string } `json:"metas"`
				Warnings []string                    `json:"warnings"`
			}
			if code := mhRun(t, mh, w.repo, &detail, "read", rel); code != 0 {
				t.Errorf("memhtml read %s: exit %d", rel, code)
				return
			}
			if detail.Metas.MemoryType != "arc" || len(detail.Warnings) > 0 {
				t.Errorf("memhtml read %s: type %q, warnings %q", rel, detail.Metas.MemoryType, detail.Warnings)
			}
		}()
	}
	wg.Wait()

	// A .gitignore from before memd init (no memhtml lines): memd's built-in list still
	// keeps memhtml's databases out.
	var kept []string
	for _, l := range strings.Split(w.read(".gitignore"), "\n") {
		if !strings.HasPrefix(l, ".memhtml/") {
			kept = append(kept, l)
		}
	}
	w.write(".gitignore", strings.Join(kept, "\n"))
	if _, err := os.Stat(w.path(".memhtml/index.db")); err != nil {
		t.Fatalf("memhtml made no index database: %v", err)
	}
	if out, code := w.memd("sync", "--config", w.config); code != 0 {
		t.Fatalf("memd sync: exit %d\n%s", code, out)
	}
	if got := w.git("ls-tree", "-r", "--name-only", "HEAD", ".memhtml/"); got != "" {
		t.Errorf("memd sync committed memhtml's files:\n%s", got)
	}
	if c, ok := w.committed(".gitignore"); !ok || strings.Contains(c, ".memhtml/") {
		t.Fatalf("the edited .gitignore was not committed: %q", c)
	}
}

// TestMemhtmlWrittenRepo: a repo made and written by the real memhtml CLI (its init, its
// write path naming files by the WRITE date, its publish generating index.html and
// sitemap.xml listings). memd doctor finds no problem in it, and memd sleep makes the arc
// of the events' year with their dates, which memhtml then indexes as an arc.
func TestMemhtmlWrittenRepo(t *testing.T) {
	mh := testutil.InstallMemhtml(t)
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
	if err := os.MkdirAll(w.repo, 0o755); err != nil {
		t.Fatal(err)
	}
	memhtml := func(args ...string) {
		t.Helper()
		cmd := mh.Command(w.repo, args...)
		cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
			"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("memhtml %s: %v\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
		}
	}
	memhtml("init")
	events := []string{"2025-03-03", "2025-04-10", "2025-06-01"}
	for _, d := range events {
		memhtml("write", "--type", "episodic", "--title", "Checkout deploy "+d, "--entity", "service:checkout-api",
			"--article-html", `<p><mark>The checkout-api deploy of `+d+` went out.</mark> It shipped on <time datetime="`+d+`">`+d+`</time>.</p>`)
	}
	memhtml("publish")
	if _, err := os.Stat(w.path("areas/inbox/index.html")); err != nil {
		t.Fatalf("memhtml publish made no inbox listing: %v", err)
	}

	out, code := w.memd("doctor", "--config", w.config)
	if code != 0 || !strings.Contains(out, "0 problems") || !strings.Contains(out, "3 memories, inbox 3") {
		t.Fatalf("memd doctor on a memhtml repo: exit %d\n%s", code, out)
	}
	if out, code := w.memd("sleep", "--config", w.config); code != 0 {
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	arc := memd.ArcsDir + "/service-checkout-api-2025.html"
	data, err := os.ReadFile(w.path(arc))
	if err != nil {
		t.Fatalf("no arc for the events' year: %v", err)
	}
	if want := "service:checkout-api in 2025: 3 episodes, 2025-03-03 to 2025-06-01."; !strings.Contains(string(data), want) {
		t.Errorf("arc claim: want %q in\n%s", want, data)
	}
	var rep rebuildReport
	if code := mhRun(t, mh, w.repo, &rep, "index", "rebuild"); code != 0 {
		t.Fatalf("memhtml index rebuild: exit %d", code)
	}
	for _, s := range rep.Skipped {
		t.Errorf("memhtml skipped %s: %s", s.Path, s.Reason)
	}
	var list struct {
		Files []struct{ Path string } `json:"files"`
	}
	if code := mhRun(t, mh, w.repo, &list, "list", "--type", "arc"); code != 0 || len(list.Files) != 1 || list.Files[0].Path != arc {
		t.Errorf("memhtml list --type arc: exit %d, %+v", code, list.Files)
	}
}
