package watcher

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchNamesSignalsOnlyNamed: a file beside the watched names wakes nothing; a watched
// name's creation and removal each do.
func TestWatchNamesSignalsOnlyNamed(t *testing.T) {
	dir := t.TempDir()
	n, err := WatchNames(map[string][]string{dir: {"HEAD", "MERGE_HEAD"}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := os.WriteFile(filepath.Join(dir, "status.json"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "MERGE_HEAD"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal for MERGE_HEAD")
	}
	// Drain what the one create may have sent, then a removal signals again.
	select {
	case <-n.C():
	default:
	}
	if err := os.Remove(filepath.Join(dir, "MERGE_HEAD")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal for MERGE_HEAD's removal")
	}
	if _, err := WatchNames(map[string][]string{filepath.Join(dir, "missing"): {"x"}}); err == nil {
		t.Fatal("a missing directory was watched")
	}
}
