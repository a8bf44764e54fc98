package testutil

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The exit codes the suites assert on (137 for the crash, the code of a clean stop) come
// from exitCode; sh stands in for memd here, which only changes what the process does.
func TestDaemonExitCodes(t *testing.T) {
	o := Options{Env: os.Environ(), ExitTimeout: 10 * time.Second}
	d := Spawn(t, "/bin/sh", o, "-c", "echo up; exec sleep 60")
	WaitFor(t, "sh to start", 10*time.Second, func() bool { return strings.Contains(d.Logs(), "up") }, d.Describe)
	if code := d.Kill(); code != 128+9 {
		t.Fatalf("Kill: exit %d, want 137%s", code, d.Describe())
	}
	if !d.HasExited() || !strings.Contains(d.Describe(), "exited 137") {
		t.Fatalf("after Kill: HasExited %v, Describe %q", d.HasExited(), d.Describe())
	}

	d = Spawn(t, "/bin/sh", o, "-c", "trap 'exit 3' TERM; echo up; while :; do sleep 0.05; done")
	WaitFor(t, "sh to start", 10*time.Second, func() bool { return strings.Contains(d.Logs(), "up") }, d.Describe)
	if code := d.Stop(); code != 3 {
		t.Fatalf("Stop: exit %d, want 3 (the trap's)%s", code, d.Describe())
	}

	if out, code := Run(t, "/bin/sh", o, 10*time.Second, "-c", "echo out; echo err >&2; exit 5"); code != 5 || out != "out\nerr\n" {
		t.Fatalf("Run: %q, exit %d; want both streams and exit 5", out, code)
	}
}

// Get without a known address is an error, not a request to some default port.
func TestDaemonGetWithoutAddress(t *testing.T) {
	d := Spawn(t, "/bin/sh", Options{Env: os.Environ()}, "-c", "exit 0")
	if _, _, err := d.Get("/healthz"); err == nil {
		t.Fatal("Get before WaitRunning found an address")
	}
	if code := d.WaitExit(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
