package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// A SIGHUP's reload (Reload → the owner's doReload, LoadConfig as memd run wires it) that
// changes expire.soft_grace or expire.ledger changes memd_ledger_notes and
// memd_ledger_records at once, without a restart and without a change to the ledger file.
func TestReloadMovesTheLedgerMetrics(t *testing.T) {
	isolateGit(t)
	dir := newRepo(t)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	// Past its expiry by a day and a half: stale within the default 14-day grace.
	must(t, os.WriteFile(filepath.Join(dir, "memory.jsonl"), []byte(
		`{"type":"note","id":"s1","text":"soft","createdAt":"2026-11-01T00:00:00Z","lifecycle":{"mode":"soft-expiry","expiresAt":"2026-11-29T00:00:00Z"}}`+"\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "areas"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "areas", "other.jsonl"), []byte(
		`{"type":"note","id":"p1","text":"one","createdAt":"2026-11-01T00:00:00Z","lifecycle":{"mode":"persistent"}}`+"\n"+
			`{"type":"note","id":"p2","text":"two","createdAt":"2026-11-01T00:00:00Z","lifecycle":{"mode":"persistent"}}`+"\n"), 0o644))

	cfg := hookConfig(dir)
	cfg.HTTP.Listen = "127.0.0.1:0"
	var mu sync.Mutex
	next := cfg
	logs := &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test", Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		LoadConfig: func() (memd.Config, error) {
			mu.Lock()
			defer mu.Unlock()
			return next, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testutil.WaitFor(t, "http listening", 20*time.Second, func() bool { return addrRE.MatchString(logs.String()) }, logs.String)
	url := "http://" + addrRE.FindStringSubmatch(logs.String())[1] + "/metrics"
	scrape := func() string {
		resp, err := http.Get(url)
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	has := func(lines ...string) func() bool {
		return func() bool {
			m := scrape()
			for _, l := range lines {
				if !strings.Contains(m, "\n"+l+"\n") {
					return false
				}
			}
			return true
		}
	}
	describe := func() string { return logs.String() + "\n" + scrape() }
	testutil.WaitFor(t, "the note counted stale", 20*time.Second,
		has(`memd_ledger_notes{mode="soft-expiry",state="stale"} 1`), describe)

	reload := func(change func(*memd.Config)) {
		t.Helper()
		mu.Lock()
		change(&next)
		mu.Unlock()
		n := strings.Count(logs.String(), "config reloaded")
		a.Reload()
		testutil.WaitFor(t, "config reloaded", 20*time.Second, func() bool { return strings.Count(logs.String(), "config reloaded") > n }, logs.String)
	}
	reload(func(c *memd.Config) { c.Expire.SoftGrace = memd.Duration(time.Hour) })
	testutil.WaitFor(t, "the note counted expired after the grace shrank", 20*time.Second,
		has(`memd_ledger_notes{mode="soft-expiry",state="expired"} 1`, `memd_ledger_notes{mode="soft-expiry",state="stale"} 0`), describe)

	reload(func(c *memd.Config) { c.Expire.Ledger = "areas/other.jsonl" })
	testutil.WaitFor(t, "the other ledger counted", 20*time.Second,
		has(`memd_ledger_records{type="note"} 2`, `memd_ledger_notes{mode="persistent",state="live"} 2`,
			`memd_ledger_notes{mode="soft-expiry",state="expired"} 0`), describe)
}

// A stop cancels the running job's ctx (runJob passes Run's): a sync stuck on a remote that
// accepted the connection and never answers ends at once, not after sync.timeout, and Run
// returns having committed what was pending.
func TestStopCancelsTheRunningJob(t *testing.T) {
	isolateGit(t)
	dir := newRepo(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c // held open, never answered
		}
	}()
	defer func() {
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	}()
	if out, err := hostGit.Run(dir, nil, "remote", "add", "origin", "http://"+ln.Addr().String()+"/memory.git"); err != nil {
		t.Fatalf("git remote add: %v %s", err, out)
	}
	cfg := hookConfig(dir)
	cfg.Sync.Timeout = memd.Duration(10 * time.Minute) // far past the test's deadline
	logs := &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var conn net.Conn
	select {
	case conn = <-accepted:
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("the start-up sync never reached the remote\n%s", logs.String())
	}
	accepted <- conn // closed by the deferred drain
	must(t, os.WriteFile(filepath.Join(dir, "areas", "at-stop.html"), []byte("at stop\n"), 0o644))
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("Run still waits on the remote 20 s after the stop: the job's ctx was not cancelled\n%s", logs.String())
	}
	if got, ok := committed(t, dir, "areas/at-stop.html"); !ok || got != "at stop\n" {
		t.Errorf("the write before the stop was not committed: %q %v", got, ok)
	}
}
