// Package gitpath holds what a tree memd would check out may contain, as git's
// verify_path (read-cache.c) and fsck (fsck.c) apply it: the rules for the name
// of one tree entry (CheckName, and the file system's folding in fold.go) and
// the walk that applies them to a fetched tree with memd's limits (tree.go:
// CheckTree, TreeCheck, ErrUnsafeTree, ErrBlobTooLarge).
//
// The walk reads go-git's tree objects, so this package imports go-git's
// plumbing (objects and the object store interface, never a repository or a
// transport): splitting the walk from the per-entry rules would put the one
// rule "what a fetched tree may hold" (names, duplicates, modes, depth, path
// length, sizes) in two packages. sync/gitrepo keeps only the caller that
// knows the work tree (its probed file system, sync.max_file_size, the log).
package gitpath

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Reasons a name is refused; CheckName wraps one of them.
var (
	ErrEmpty    = errors.New("empty name")
	ErrDot      = errors.New(`name "." or ".."`)
	ErrSlash    = errors.New("name contains '/'")
	ErrNUL      = errors.New("name contains NUL")
	ErrDotGit   = errors.New("name is .git (or an alias of it)")
	ErrSymlinkd = errors.New("symlinked .gitmodules, .gitattributes, .gitignore or .mailmap")
	// ErrBackslash: git refuses '\' on Windows only (protectNTFS); memd
	// refuses it everywhere: such a name cannot be checked out on every
	// machine a memory repo is shared with, and on Windows it is a path.
	ErrBackslash = errors.New(`name contains '\'`)
)

// CheckName reports why one tree entry name may not be checked out (nil when
// it may). symlink says whether the entry is a symbolic link.
func CheckName(name string, symlink bool) error {
	switch {
	case name == "":
		return ErrEmpty
	case name == "." || name == "..":
		return ErrDot
	case strings.IndexByte(name, '/') >= 0:
		return ErrSlash
	case strings.IndexByte(name, 0) >= 0:
		return ErrNUL
	case strings.IndexByte(name, '\\') >= 0:
		return ErrBackslash
	case strings.EqualFold(name, ".git") || IsHFSDotGit(name) || IsNTFSDotGit(name):
		return ErrDotGit
	}
	if symlink {
		for _, g := range generic {
			if isHFSDot(name, g.name) || isNTFSDotGeneric(name, g.name, g.short) {
				return ErrSymlinkd
			}
		}
	}
	return nil
}

// The files git refuses as symlinks, with their NTFS 8.3 fallback prefixes
// (git's is_ntfs_dotgitmodules and friends).
var generic = []struct{ name, short string }{
	{"gitmodules", "gi7eba"},
	{"gitattributes", "gi7d29"},
	{"gitignore", "gi250a"},
	{"mailmap", "maba30"},
}

// hfsIgnorable are the code points HFS+ drops when comparing names (git's
// next_hfs_char): ".g\u200cit" is ".git" there.
func hfsIgnorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// IsHFSDotGit: name is ".git" once HFS+ ignorable code points are dropped
// and ASCII case is folded.
func IsHFSDotGit(name string) bool { return isHFSDot(name, "git") }

// isHFSDot: name equals "."+needle (needle lower-case ASCII) under HFS+
// comparison.
func isHFSDot(name, needle string) bool {
	want := "." + needle
	i := 0
	for len(name) > 0 {
		r, size := utf8.DecodeRuneInString(name)
		name = name[size:]
		if r == utf8.RuneError && size == 1 {
			return false // invalid UTF-8 never equals an ASCII name
		}
		if hfsIgnorable(r) {
			continue
		}
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		if i >= len(want) || r != rune(want[i]) {
			return false
		}
		i++
	}
	return i == len(want)
}

// IsNTFSDotGit is git's is_ntfs_dotgit: ".git" or its 8.3 short name
// "git~1", case-insensitive, followed only by spaces and dots, up to the
// end, a '\' or a ':' (an alternate data stream such as "::$INDEX_ALLOCATION").
func IsNTFSDotGit(name string) bool {
	n := len(name)
	for i := 0; i < len(name); i++ {
		if c := name[i]; c == '\\' || c == '/' || c == ':' {
			n = i
			break
		}
	}
	seg := name[:n]
	if len(seg) >= 4 && strings.EqualFold(seg[:4], ".git") && onlySpacesDots(seg[4:]) {
		return true
	}
	if len(seg) >= 5 && strings.EqualFold(seg[:5], "git~1") && onlySpacesDots(seg[5:]) {
		return true
	}
	return false
}

func onlySpacesDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '.' {
			return false
		}
	}
	return true
}

// spacesDotsToEnd: from i on, only spaces and dots up to the end or a ':'.
func spacesDotsToEnd(s string, i int) bool {
	for ; i < len(s); i++ {
		switch s[i] {
		case ':':
			return true
		case ' ', '.':
		default:
			return false
		}
	}
	return true
}

// isNTFSDotGeneric is git's is_ntfs_dot_generic: "."+needle, its short name
// (first six letters + "~1".."~4"), or the 8.3 fallback (prefix + "~<digit>").
func isNTFSDotGeneric(name, needle, short string) bool {
	if len(name) >= 1+len(needle) && name[0] == '.' && strings.EqualFold(name[1:1+len(needle)], needle) {
		return spacesDotsToEnd(name, 1+len(needle))
	}
	if len(name) >= 8 && strings.EqualFold(name[:6], needle[:6]) && name[6] == '~' && name[7] >= '1' && name[7] <= '4' {
		return spacesDotsToEnd(name, 8)
	}
	sawTilde := false
	i := 0
	for ; i < 8; i++ {
		if i >= len(name) {
			return false
		}
		c := name[i]
		switch {
		case sawTilde:
			if c < '0' || c > '9' {
				return false
			}
		case c == '~':
			i++
			if i >= len(name) || name[i] < '1' || name[i] > '9' {
				return false
			}
			sawTilde = true
		case i >= 6:
			return false
		case c&0x80 != 0:
			return false
		default:
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != short[i] {
				return false
			}
		}
	}
	return spacesDotsToEnd(name, i)
}
