package sleep

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// flushFS makes every write under dir durable with one syncfs(2) of its filesystem, instead
// of an fsync per file: an apply writes hundreds of files and per-file fsyncs dominated it.
func flushFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("flush %s: %w", dir, err)
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return fmt.Errorf("flush %s: syncfs: %w", dir, err)
	}
	return nil
}
