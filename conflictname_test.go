package memd

import (
	"testing"
	"time"
)

// TestConflictCopyOriginal: every name ConflictCopyPath makes reads back to its original, and
// names that are not conflict copies are refused.
func TestConflictCopyOriginal(t *testing.T) {
	now := time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)
	for _, orig := range []string{"areas/people/sanju.html", "notes.md", ".env", "a/b/x.tar.gz", "projects/memd/MEMORY.md"} {
		for _, host := range []string{"laptop", "Box.example.com", "laptop-2"} {
			cp := ConflictCopyPath(orig, host, now)
			got, ok := ConflictCopyOriginal(cp)
			if !ok || got != orig {
				t.Errorf("ConflictCopyOriginal(%q) = %q, %v; want %q", cp, got, ok, orig)
			}
		}
	}
	for _, p := range []string{"areas/x.html", "x.conflict-.html", "x.conflict-h-2026.html", "conflict-h-20261130T143205Z.html", "memory.conflicts.jsonl"} {
		if got, ok := ConflictCopyOriginal(p); ok {
			t.Errorf("ConflictCopyOriginal(%q) = %q, true; want not a copy", p, got)
		}
	}
}
