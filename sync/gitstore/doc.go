// Package gitstore is the part of git's on-disk repository memd writes and
// reads itself instead of through go-git, each the way git does it: lock
// files (O_EXCL "<file>.lock", written, fsynced, renamed over the file) and
// when one left by a killed process is stale, refs (loose, then
// packed-refs), and the index file, written as go-git's encoder does (only
// faster) or spliced with a few changed entries (docs/ARCHITECTURE.md §9.1,
// §9.5); the writing of objects: ObjectBatch writes loose objects to temp
// files and makes them durable together (fsync, rename, fsync the
// directories) before any ref may name them, and a big tree in compressed
// pieces a later commit reuses (treez.go, §3); and the reading of objects:
// Storage is go-git's storage with packed objects found through PackIndex,
// which reads a pack's .idx in place from a memory map as git does instead of
// decoding it onto the heap. Its only state is the list of open packs: which
// ref moves when, which trees stay decoded, and what the index holds, is
// sync/gitrepo's (gitlock.go, commit.go, index.go).
package gitstore
