package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memd-dev/memd"
	tu "github.com/memd-dev/memd/internal/testutil"
)

// TestPushRefusedIsErrorNotOffline: a remote whose pre-receive hook refuses every push (as
// GitHub's push protection answers) puts memd in state error with the remote's own words
// and one event, never offline; the next try waits pull_interval, not the backoff's second;
// local commits go on.
func TestPushRefusedIsErrorNotOffline(t *testing.T) {
	rig := newHookRig(t)
	hook := "#!/bin/sh\ncat >/dev/null\necho 'error: GH013: Repository rule violations found for refs/heads/main.' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(rig.bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	remoteBefore := head(t, rig.bare)
	cfg := hookConfig(rig.dir)
	cfg.Sync.PullInterval = memd.Duration(time.Hour)
	a, logs, stop := startAgent(t, cfg)
	defer stop()
	if err := os.WriteFile(filepath.Join(rig.dir, "refused.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		State, Error string
		Events       []struct{ Kind, Text string }
	}
	tu.WaitFor(t, "state error with the remote's message", 30*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(cfg.StateDir(), "status.json"))
		_ = json.Unmarshal(b, &doc)
		return doc.State == "error" && strings.Contains(doc.Error, "GH013: Repository rule violations found")
	}, func() string { return fmt.Sprintf("%+v\n%s", doc, logs.String()) })
	events := 0
	for _, e := range doc.Events {
		if e.Kind == "error" && strings.Contains(e.Text, "GH013") {
			events++
		}
	}
	if events != 1 {
		t.Errorf("%d error events naming GH013, want 1: %+v", events, doc.Events)
	}
	if !strings.Contains(logs.String(), "next=1h0m0s") {
		t.Errorf("the retry does not wait pull_interval:\n%s", logs.String())
	}
	// Local commits go on while the push waits.
	if err := os.WriteFile(filepath.Join(rig.dir, "later.txt"), []byte("y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tu.WaitFor(t, "the next local commit", 20*time.Second, func() bool {
		_, ok := committed(t, rig.dir, "later.txt")
		return ok
	}, logs.String)
	if err := testutil.GatherAndCompare(a.metrics.Registry(), strings.NewReader(`
# HELP memd_push_attempts_total Pushes tried, rejected ones included.
# TYPE memd_push_attempts_total counter
memd_push_attempts_total 1
`), "memd_push_attempts_total"); err != nil {
		t.Errorf("no retry before pull_interval: %v\n%s", err, logs.String())
	}
	if head(t, rig.bare) != remoteBefore {
		t.Error("the remote moved")
	}
	if strings.Contains(logs.String(), "state=offline") {
		t.Errorf("went offline:\n%s", logs.String())
	}
}
