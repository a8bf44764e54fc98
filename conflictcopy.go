package memd

import (
	"path"
	"regexp"
	"strings"
	"time"
)

// IsConflictCopy reports whether p is a conflict copy memd made, or lies in one (a copy
// made for a file-against-directory collision is a directory): any segment named as
// ConflictCopyPath names things (conflictCopyName). Sleep never moves, archives or lists
// one (docs/ARCHITECTURE.md §11): it is a person's to merge, and its original's path is in its name.
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

// ConflictCopyPath names the copy of ours kept beside a conflicting path:
// <stem>.conflict-<host>-<YYYYMMDDTHHMMSSZ><ext>, in the same directory with
// the same extension, so a memory's copy is still a valid memory path.
func ConflictCopyPath(name, host string, now time.Time) string {
	dir, base := path.Split(name)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "" { // a dotfile like ".env": keep the whole name as stem
		stem, ext = base, ""
	}
	return dir + stem + ".conflict-" + sanitizeHost(host) + "-" + now.UTC().Format("20060102T150405Z") + ext
}

// sanitizeHost keeps a host name safe as a path segment part: lower case
// letters, digits and '-', everything else folded to '-'.
func sanitizeHost(h string) string {
	h = strings.ToLower(h)
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i] // short host name: the domain adds length, not meaning
	}
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		return "host"
	}
	return s
}

// conflictCopyName matches what ConflictCopyPath makes of a base name: stem, host (with an
// optional -N when the name was taken), UTC time, extension.
var conflictCopyName = regexp.MustCompile(`^(.+)\.conflict-[a-z0-9-]+-\d{8}T\d{6}Z(\.[^.]*)?$`)

// ConflictCopyOriginal is the path a conflict copy was kept beside: the inverse of
// ConflictCopyPath for a file, ok false when p is not a conflict copy's name. A copy made for
// a file-against-directory collision (areas/x.conflict-…/y.html) names its directory part.
func ConflictCopyOriginal(p string) (string, bool) {
	dir, base := path.Split(p)
	if !strings.Contains(base, ".conflict-") {
		return "", false // most names: no regexp run (the inventory asks of every file each scan)
	}
	m := conflictCopyName.FindStringSubmatch(base)
	if m == nil {
		return "", false
	}
	return dir + m[1] + m[2], true
}
