package memd

import (
	"testing"
	"time"
)

func TestIsConflictCopy(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)
	cp := ConflictCopyPath("areas/oncall/20240310-rollback.html", "laptop-2", now)
	for p, want := range map[string]bool{
		cp: true, ConflictCopyPath("areas/x", "h", now) + "/y.html": true,
		"areas/oncall/20240310-rollback.html": false, "areas/x.conflict-notes.html": false,
		"memory.conflicts.jsonl": false,
	} {
		if got := IsConflictCopy(p); got != want {
			t.Errorf("IsConflictCopy(%q) = %v, want %v", p, got, want)
		}
	}
}
