package memd

import "strings"

// IsConflictCopy reports whether p is a conflict copy memd made, or lies in one (a copy
// made for a file-against-directory collision is a directory): any segment named as
// ConflictCopyPath names things (conflictCopyName). Sleep never moves, archives or lists
// one (DESIGN §9): it is a person's to merge, and its original's path is in its name.
func IsConflictCopy(p string) bool {
	if !strings.Contains(p, ".conflict-") { // every walk asks, for every file: the regexp only when it may match
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if conflictCopyName.MatchString(seg) {
			return true
		}
	}
	return false
}
