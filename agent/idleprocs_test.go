package agent

import (
	"runtime"
	"testing"
)

// TestIdleProcsOnlyWhileEveryAgentIdles: the process runs on one P only while every agent
// in it is idle; the first job of any of them gives the Ps back before it runs, and an
// agent's stop leaves them.
func TestIdleProcsOnlyWhileEveryAgentIdles(t *testing.T) {
	full := runtime.GOMAXPROCS(0)
	if full < 2 {
		t.Skip("GOMAXPROCS is 1 already")
	}
	idleProcs.Lock()
	others := idleProcs.busy
	idleProcs.Unlock()
	if others != 0 {
		t.Skipf("%d agents of other tests still counted busy", others)
	}
	t.Cleanup(func() { runtime.GOMAXPROCS(full) })
	a, b := &Agent{}, &Agent{}
	a.procsStart()
	b.procsStart()
	a.procsIdle(true)
	if n := runtime.GOMAXPROCS(0); n != full {
		t.Fatalf("one agent idle, one busy: GOMAXPROCS %d, want %d", n, full)
	}
	b.procsIdle(true)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("both idle: GOMAXPROCS %d, want 1", n)
	}
	b.procsIdle(true) // a second idle tick counts nothing
	a.procsIdle(false)
	if n := runtime.GOMAXPROCS(0); n != full {
		t.Fatalf("a job on one agent: GOMAXPROCS %d, want %d", n, full)
	}
	a.procsIdle(true)
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Fatalf("both idle again: GOMAXPROCS %d, want 1", n)
	}
	a.procsGone()
	if n := runtime.GOMAXPROCS(0); n != full {
		t.Fatalf("after a stop: GOMAXPROCS %d, want %d", n, full)
	}
	b.procsGone()
	if idleProcs.busy != 0 || idleProcs.low {
		t.Fatalf("after both stopped: %d busy, low %t; want 0, false", idleProcs.busy, idleProcs.low)
	}
}
