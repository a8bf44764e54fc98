package memd

import "strings"

// MaxDeletesShare is the mass deletion brake's second bar (docs/ARCHITECTURE.md §11): a commit or a
// fetched commit is held only when it deletes more than sync.max_deletes memory files and
// more than this share of them, so a small repo's clean-up of a few files never trips it.
const MaxDeletesShare = 0.20

// IsMemoryFile reports whether rel is a memory file as the inventory counts them: an
// .html file in one of the buckets that is not a generated listing.
func IsMemoryFile(rel string) bool {
	return strings.HasSuffix(rel, MemoryExt) && !IsNonMemory(rel)
}

// MassDeletion reports whether deleting deleted of total memory files trips the brake
// with sync.max_deletes = max: more than max, and more than MaxDeletesShare of total.
func MassDeletion(deleted, total, max int) bool {
	return deleted > max && float64(deleted) > MaxDeletesShare*float64(total)
}
