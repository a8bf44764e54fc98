package boundedfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO, a link (to /dev/zero), a device and a file over the limit are refused at once.
func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo, link, big, ok := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "big"), filepath.Join(dir, "ok")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(big, make([]byte, 2048), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ok, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for name, want := range map[string]error{fifo: ErrNotRegular, link: ErrNotRegular, "/dev/zero": ErrNotRegular, big: ErrTooLarge} {
		_, _, err := Read(name, 1024, "1 KiB")
		var be *Error
		if !errors.Is(err, want) || !errors.As(err, &be) || be.Path != name || !strings.Contains(err.Error(), "(") {
			t.Errorf("Read(%s): %v, want %v saying what is there", name, err, want)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusals took %s", d)
	}
	if b, fi, err := Read(ok, 1024, "1 KiB"); err != nil || string(b) != "hello" || fi.Size() != 5 {
		t.Errorf("Read(ok) = %q %v", b, err)
	}
	if _, _, err := Read(filepath.Join(dir, "none"), 1024, "1 KiB"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
