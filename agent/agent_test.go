package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// These tests run the Agent in the test process, so `go test -race` watches the owner loop,
// the watcher reader, the index refresher and the HTTP readers together (the e2e tests run
// the binary, which is not built with -race).

// isolateGit keeps the user's git config out of the git processes memd starts.
func isolateGit(t *testing.T) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "gitconfig")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", cfg)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

// newRepo makes a memory repo the way `memd init` does: skeleton, first commit, index.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := gitrepo.Init(dir, "main"); err != nil {
		t.Fatal(err)
	}
	r, err := gitrepo.Open(dir, gitrepo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	created, err := scaffold.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitPathsMessage(created, "memd: init\n", memd.CommitChange); err != nil {
		t.Fatal(err)
	}
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostGit runs git with the test process's environment (isolateGit's config, when set).
var hostGit testutil.Git

func committed(t *testing.T, dir, rel string) (string, bool) {
	out, err := hostGit.Run(dir, nil, "cat-file", "-p", "HEAD:"+rel)
	return out, err == nil
}

var addrRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// The whole agent in one process: commits from the real watcher while HTTP readers scrape,
// a reload that adds an ignore pattern, reconcile and sync kicks, and a cancel that commits
// what was written just before it.
func TestAgentInProcess(t *testing.T) {
	isolateGit(t)
	dir := newRepo(t)
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(time.Second)
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Sleep.CatchUp = false
	logs := &testutil.LockedBuffer{}
	reloaded := cfg
	reloaded.Watch.Ignore = []string{"*.bak"}
	a, err := New(Options{
		Config:     cfg,
		Logger:     slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Version:    "test",
		LoadConfig: func() (memd.Config, error) { return reloaded, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	testutil.WaitFor(t, "memd running", 20*time.Second, func() bool { return strings.Contains(logs.String(), `msg="memd running"`) }, logs.String)
	m := addrRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no http address\n%s", logs.String())
	}
	base := "http://" + m[1]

	// Readers hammer the endpoints the whole time: they must only read published snapshots.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readErrs := make(chan error, 3)
	for _, p := range []string{"/metrics", "/status.json", "/healthz"} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			c := http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := c.Get(base + p)
				if err != nil {
					readErrs <- fmt.Errorf("GET %s: %w", p, err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					readErrs <- fmt.Errorf("GET %s: %d", p, resp.StatusCode)
					return
				}
			}
		}()
	}

	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		write(fmt.Sprintf("areas/inproc/f%02d.html", i), fmt.Sprintf("%d\n", i))
		if i%5 == 0 {
			a.KickReconcile()
			a.KickSync() // no remote: a no-op that must not disturb anything
		}
	}
	testutil.WaitFor(t, "20 files committed", 20*time.Second, func() bool {
		got, ok := committed(t, dir, "areas/inproc/f19.html")
		if !ok || got != "19\n" {
			return false
		}
		out, _ := hostGit.Run(dir, nil, "ls-tree", "--name-only", "HEAD", "areas/inproc/")
		return strings.Count(out, "\n") == 20
	}, logs.String)

	// Reload adds *.bak to the ignore list: a .bak file is then never committed.
	a.Reload()
	testutil.WaitFor(t, "config reloaded", 20*time.Second, func() bool { return strings.Contains(logs.String(), "config reloaded") }, logs.String)
	write("areas/inproc/x.bak", "backup\n")
	write("areas/inproc/after-reload.html", "after\n")
	testutil.WaitFor(t, "after-reload.html committed", 20*time.Second, func() bool {
		_, ok := committed(t, dir, "areas/inproc/after-reload.html")
		return ok
	}, logs.String)

	if _, ok := committed(t, dir, "areas/inproc/x.bak"); ok {
		t.Fatal("x.bak committed after the reload made *.bak ignored")
	}

	// Written just before the cancel (SIGTERM in memd run): committed at stop.
	write("areas/inproc/last.html", "last\n")
	close(stop)
	readers.Wait()
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return after cancel\n%s", logs.String())
	}
	select {
	case err := <-readErrs:
		t.Fatal(err)
	default:
	}
	if got, ok := committed(t, dir, "areas/inproc/last.html"); !ok || got != "last\n" {
		t.Fatalf("write before cancel not committed: %q %v\n%s", got, ok, logs.String())
	}
	doc, err := os.ReadFile(filepath.Join(cfg.StateDir(), "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PID        int             `json:"pid"`
		Pending    int             `json:"pending"`
		LastCommit *map[string]any `json:"last_commit"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatalf("status.json: %v\n%s", err, doc)
	}
	if st.Pending != 0 || st.LastCommit == nil || st.PID != os.Getpid() {
		t.Fatalf("status.json after stop: %s", doc)
	}
	// Only the ignored-by-memd backup is left; everything else is committed and indexed.
	if out, err := hostGit.Run(dir, nil, "status", "--porcelain", "--untracked-files=all"); err != nil || out != "?? areas/inproc/x.bak\n" {
		t.Fatalf("git status after stop: %q %v", out, err)
	}
}

// The pid file is exclusive while held (even within one process: flock is per open file)
// and names the holder; released, it can be taken again.
func TestPIDFileExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p1, err := AcquirePIDFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = AcquirePIDFile(dir)
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second acquire: %v, want ErrAlreadyRunning", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(os.Getpid())) {
		t.Fatalf("error does not name the holder pid %d: %v", os.Getpid(), err)
	}
	p1.Release()
	p2, err := AcquirePIDFile(dir)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	p2.Release()
}
