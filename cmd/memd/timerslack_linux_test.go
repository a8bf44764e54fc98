package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestRunWidensTimerSlack: every thread of `memd run` runs with runTimerSlack (it re-executes
// itself with it), so the runtime's sysmon does not wake every 70 µs while a look runs; the
// pid stays the one that was started (a service manager's).
func TestRunWidensTimerSlack(t *testing.T) {
	bin := memdBinary(t)
	home, env := sandboxHome(t)
	repo, cfg := filepath.Join(home, "memory"), filepath.Join(home, "memd.yaml")
	if err := os.WriteFile(cfg, []byte("repo: "+repo+"\nhttp: {listen: \"127.0.0.1:0\"}\nsleep: {catch_up: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := testutil.Run(t, bin, testutil.Options{Env: env}, time.Minute, "init", "--config", cfg, repo); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	d := testutil.Start(t, bin, testutil.Options{Env: env, LogOnFailure: true}, "run", "--config", cfg)
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(d.PID()) + "/task")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of memd run (pid %d): %v", d.PID(), err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + task.Name() + "/timerslack_ns")
		if err != nil {
			t.Skipf("timer slack not readable here: %v", err)
		}
		if ns, _ := strconv.Atoi(strings.TrimSpace(string(b))); ns < runTimerSlack {
			t.Errorf("thread %s of memd run: timer slack %d ns, want at least %d", task.Name(), ns, runTimerSlack)
		}
	}
}
