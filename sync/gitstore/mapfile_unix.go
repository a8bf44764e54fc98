//go:build unix

package gitstore

import (
	"fmt"
	"os"
	"syscall"
)

// MapFile maps path read-only for a reader of git's files that only touches a part of them
// (a commit-graph, a pack's .idx), so that what the read costs does not grow with the file;
// release unmaps it, after which the bytes must not be touched. Git replaces these files by
// renaming new ones into place, never by writing into them, so a mapping stays what it was.
func MapFile(path string) (data []byte, release func(), err error) { return mapFile(path) }

// mapFile maps path read-only and returns the bytes and the function that unmaps them.
// An empty file gives an empty slice (mmap refuses a zero length).
func mapFile(path string) ([]byte, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := fi.Size()
	if size == 0 {
		return []byte{}, func() {}, nil
	}
	if size != int64(int(size)) {
		return nil, nil, fmt.Errorf("%d bytes is too large to map", size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap: %w", err)
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}
