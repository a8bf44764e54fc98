//go:build !unix

package gitstore

import "os"

// mapFile reads path whole where there is no mmap; memd ships for Linux and macOS only.
func mapFile(path string) ([]byte, func(), error) {
	data, err := os.ReadFile(path)
	return data, func() {}, err
}

// MapFile reads path whole where there is no mmap (see the unix one).
func MapFile(path string) (data []byte, release func(), err error) { return mapFile(path) }
