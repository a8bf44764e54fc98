package gitattr

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeProcess is a long-running filter in Python speaking git's protocol: clean upper-cases,
// smudge lower-cases, a path containing "err" gets status=error, "abort" status=abort, and
// "die" makes the process exit mid-request.
const fakeProcess = `
import sys
r, w = sys.stdin.buffer, sys.stdout.buffer
def rd():
    n = r.read(4)
    if not n: sys.exit(0)
    n = int(n, 16)
    return None if n == 0 else r.read(n - 4)
def lst():
    out = []
    while True:
        p = rd()
        if p is None: return out
        out.append(p.decode().rstrip("\n"))
def pkt(b): w.write(b"%04x" % (len(b) + 4) + b)
def flush(): w.write(b"0000")
assert lst() == ["git-filter-client", "version=2"]
pkt(b"git-filter-server\n"); pkt(b"version=2\n"); flush(); w.flush()
lst()
pkt(b"capability=clean\n"); pkt(b"capability=smudge\n"); flush(); w.flush()
while True:
    req = dict(kv.split("=", 1) for kv in lst())
    data = b""
    while True:
        p = rd()
        if p is None: break
        data += p
    path = req["pathname"]
    if "die" in path: sys.exit(3)
    if "err" in path or "abort" in path:
        pkt(b"status=" + (b"error" if "err" in path else b"abort") + b"\n"); flush(); w.flush(); continue
    out = data.upper() if req["command"] == "clean" else data.lower()
    pkt(b"status=success\n"); flush()
    for i in range(0, len(out), 65516): pkt(out[i:i+65516])
    flush(); flush(); w.flush()
`

func TestProcessProtocol(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	script := filepath.Join(t.TempDir(), "filter.py")
	if err := os.WriteFile(script, []byte(fakeProcess), 0o644); err != nil {
		t.Fatal(err)
	}
	_, e := repo(t, "*.f filter=fake\n", "filter.fake.process", "python3 "+script, "filter.fake.required", "true")
	big := strings.Repeat("abcdefgh", 40000) // several packets each way
	out, err := e.Conv("a.f").Clean([]byte(big), nil)
	if err != nil || string(out) != strings.ToUpper(big) {
		t.Fatalf("clean: %d bytes, %v", len(out), err)
	}
	if back, err := e.Conv("a.f").Smudge(out); err != nil || string(back) != big {
		t.Fatalf("smudge: %d bytes, %v", len(back), err)
	}
	pid := e.procs["fake"].cmd.Process.Pid
	for _, p := range []string{"err.f", "die.f"} {
		if _, err := e.Conv(p).Clean([]byte("x"), nil); !errors.Is(err, ErrFilter) {
			t.Errorf("%s: %v, want ErrFilter", p, err)
		}
	}
	// The died process is started again for the next request.
	if out, err := e.Conv("b.f").Clean([]byte("ok"), nil); err != nil || string(out) != "OK" {
		t.Errorf("after the process died: %q, %v", out, err)
	}
	if p := e.procs["fake"]; p == nil || p.cmd.Process.Pid == pid {
		t.Error("the process was not started again")
	}
	// abort: git asks that process for the capability no more; the path fails (held).
	if _, err := e.Conv("abort.f").Clean([]byte("x"), nil); !errors.Is(err, ErrFilter) {
		t.Errorf("abort: %v", err)
	}
	if _, err := e.Conv("c.f").Clean([]byte("x"), nil); !errors.Is(err, ErrFilter) {
		t.Errorf("clean after abort: %v, want ErrFilter", err)
	}
	if out, err := e.Conv("c.f").Smudge([]byte("X")); err != nil || string(out) != "x" {
		t.Errorf("smudge after a clean abort: %q, %v", out, err)
	}
}
