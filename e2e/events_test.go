package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

type statusEvent struct {
	ID   uint64 `json:"id"`
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// events reads the status document's events through `memd status --format json`.
func (w *world) events() []statusEvent {
	w.t.Helper()
	out, _ := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", "json")
	var doc struct {
		Events []statusEvent `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		w.t.Fatalf("memd status --format json: %v\n%s", err, out)
	}
	return doc.Events
}

// waitEvent waits for an event whose text starts with prefix and an id above after.
func (w *world) waitEvent(d *testutil.Daemon, prefix string, after uint64) statusEvent {
	w.t.Helper()
	var found statusEvent
	var last []statusEvent
	testutil.WaitFor(w.t, "an event "+prefix, commitTimeout, func() bool {
		last = w.events()
		for _, e := range last {
			if e.ID > after && strings.HasPrefix(e.Text, prefix) {
				found = e
				return true
			}
		}
		return false
	}, func() string { b, _ := json.Marshal(last); return "events: " + string(b) + d.Describe() })
	return found
}

// TestEventsOfflineAndBackAcrossRestart: a remote that does not answer is one `offline`
// event, its return one `back online`; after a restart the ids go on from the last ones, so a
// reader that streamed them shows each once. (A remote that answers "not found" is an error,
// not offline: offline means nobody answers, here a git HTTP server whose port is closed.)
func TestEventsOfflineAndBackAcrossRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	root := filepath.Join(w.home, "git")
	bare := filepath.Join(root, "remote.git")
	w.sh("git init -q --bare -b main " + bare)
	w.sh("git -C " + bare + " config http.receivepack true") // anonymous pushes over HTTP
	srv := testutil.NewGitHTTPServer(t, root, "")
	srv.Stop() // the port is closed: nobody answers
	w.sh("git remote add origin " + srv.URL("remote.git"))
	d := w.start()
	off := w.waitEvent(d, "offline: ", 0)
	if off.Kind != "warn" {
		t.Fatalf("offline event %+v, want kind warn", off)
	}
	srv.Start() // the same address again
	back := w.waitEvent(d, "back online: synced with origin/main", off.ID)
	if back.Kind != "ok" || back.ID != off.ID+1 {
		t.Fatalf("back event %+v after %+v", back, off)
	}
	n := 0
	for _, e := range w.events() {
		if strings.HasPrefix(e.Text, "offline") {
			n++
		}
	}
	if n != 1 { // the retries while offline are not news
		t.Fatalf("offline said %d times: %+v", n, w.events())
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}

	// Restart with the remote gone again: the new event's id follows the old ones.
	srv.Stop()
	d = w.start()
	again := w.waitEvent(d, "offline: ", back.ID)
	if again.ID != back.ID+1 {
		t.Fatalf("after restart: %+v, want id %d", again, back.ID+1)
	}
	if evs := w.events(); evs[0].ID != off.ID {
		t.Fatalf("the old events were not kept across the restart: %+v", evs)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}
