package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	addrRE  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	tokenRE = regexp.MustCompile(`name="memd-token" content="([0-9a-f]+)"`)
)

// daemonFigures are one repo's: start-up to "memd running", a 1-file commit (write to the
// branch moved), memd status, and the page's first 20 history entries.
type daemonFigures struct{ start, commit, status, page time.Duration }

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// benchDaemon runs a daemon on each repo reps times, the big and the small one in turn, so
// a noisy neighbour weighs on both sides alike, and takes each figure's median.
func (g *genPlan) benchDaemon(bin, home, big, small string, reps int) ([]result, error) {
	var bs, ss []daemonFigures
	for range reps {
		fb, err := g.daemon(bin, home, big, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", big, err)
		}
		fs, err := g.daemon(bin, home, small, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", small, err)
		}
		bs, ss = append(bs, fb), append(ss, fs)
	}
	fb, fs := medianFigures(bs), medianFigures(ss)
	deep := fmt.Sprintf("%d commits vs 100 commits, same tree", g.n)
	return []result{
		{"the page's first 20 history entries (GET /history?limit=20), vs the 100-commit repo", sec(fb.page), sec(fs.page), ratio(fb.page, fs.page), "≤ 0.5 s"},
		{"daemon start-up (to \"memd running\"), " + deep, sec(fb.start), sec(fs.start), ratio(fb.start, fs.start), "≤ 1.1x"},
		{"a 1-file commit (write to the branch moved, 300 ms quiet), " + deep, sec(fb.commit), sec(fs.commit), ratio(fb.commit, fs.commit), "≤ 1.1x"},
		{"`memd status`, " + deep, sec(fb.status), sec(fs.status), ratio(fb.status, fs.status), "≤ 1.1x"},
	}, nil
}

// medianFigures is each figure's median over the runs.
func medianFigures(fs []daemonFigures) daemonFigures {
	med := func(get func(daemonFigures) time.Duration) time.Duration {
		ds := make([]time.Duration, len(fs))
		for i, f := range fs {
			ds[i] = get(f)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	return daemonFigures{
		start:  med(func(f daemonFigures) time.Duration { return f.start }),
		commit: med(func(f daemonFigures) time.Duration { return f.commit }),
		status: med(func(f daemonFigures) time.Duration { return f.status }),
		page:   med(func(f daemonFigures) time.Duration { return f.page }),
	}
}

func (g *genPlan) daemon(bin, home, repo string, reps int) (daemonFigures, error) {
	var f daemonFigures
	cfg := filepath.Join(home, filepath.Base(repo)+".yaml")
	if err := os.WriteFile(cfg, []byte("watch: {quiet: 300ms, max_delay: 2s}\nhttp: {listen: \"127.0.0.1:0\"}\nsleep: {catch_up: false}\n"), 0o600); err != nil {
		return f, err
	}
	e := env(home)
	logs := &logBuf{}
	cmd := exec.Command(bin, "run", "--config", cfg, "--repo", repo)
	cmd.Env, cmd.Stdout, cmd.Stderr = e, logs, logs
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return f, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := poll(time.Minute, func() bool { return strings.Contains(logs.String(), `msg="memd running"`) }); err != nil {
		return f, fmt.Errorf("start: %v\n%s", err, logs.String())
	}
	f.start = time.Since(t0)
	m := addrRE.FindStringSubmatch(logs.String())
	if m == nil {
		return f, fmt.Errorf("no http address in the log:\n%s", logs.String())
	}
	addr := m[1]
	time.Sleep(time.Second) // start-up's own commits and inventory settle
	var err error
	if f.commit, err = timed(reps, nil, func() error { return oneCommit(repo) }); err != nil {
		return f, err
	}
	if f.status, err = timed(reps*9, nil, func() error { return sh(repo, e, bin, "status", "--config", cfg, "--repo", repo) }); err != nil {
		return f, err
	}
	page, err := get("http://"+addr+"/", "")
	if err != nil {
		return f, err
	}
	tm := tokenRE.FindStringSubmatch(page)
	if tm == nil {
		return f, fmt.Errorf("no token in the page")
	}
	f.page, err = timed(reps, nil, func() error { return firstPage(addr, tm[1], g.logPath) })
	return f, err
}

// firstPage asks for the history as the page does: 20 entries, asking on from where the
// walk got while it has fewer and is not done.
func firstPage(addr, token, path string) error {
	var n int
	next := ""
	for {
		body, err := get("http://"+addr+"/history?limit=20&path="+url.QueryEscape(path)+"&from="+url.QueryEscape(next), token)
		if err != nil {
			return err
		}
		var pg struct {
			Entries []json.RawMessage
			Next    string
		}
		if err := json.Unmarshal([]byte(body), &pg); err != nil {
			return fmt.Errorf("history page: %v: %.200s", err, body)
		}
		n += len(pg.Entries)
		if next = pg.Next; n >= 20 || next == "" {
			if n == 0 {
				return fmt.Errorf("history page: no entries")
			}
			return nil
		}
	}
}

// oneCommit writes one memory and waits for the branch to move.
func oneCommit(repo string) error {
	before, err := shOut(repo, gitEnv, "git", "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	p := filepath.Join(repo, "areas", "bench-commit.html")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>%d</p>\n", time.Now().UnixNano())), 0o644); err != nil {
		return err
	}
	return poll(time.Minute, func() bool {
		now, err := shOut(repo, gitEnv, "git", "rev-parse", "HEAD")
		return err == nil && now != before
	})
}

func get(u, token string) (string, error) {
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("X-Memd-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return string(b), err
}

func poll(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("not within %s", d)
}
