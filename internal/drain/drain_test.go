package drain

import (
	"io"
	"os"
	"testing"
	"time"
)

func TestInput(t *testing.T) {
	// A pipe that is written and closed is read to the end.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write([]byte(`{"session_id":"x"}`)); w.Close() }()
	Input(r, 1<<20, 5*time.Second)
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("not drained: %d %v", n, err)
	}
	r.Close()
	// A pipe that never closes does not hold us past the bound.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	defer r2.Close()
	done := make(chan struct{})
	go func() { Input(r2, 1<<20, 50*time.Millisecond); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Input waited on an open pipe")
	}
	Input(nil, 1, time.Millisecond)
}

// TestInputSkipsCharDevices: a terminal (any character device) is never read. /dev/zero
// stands in for it: reading it to the 1 TiB bound would not finish before the wait, so
// Input returning well before that wait means it did not read.
func TestInputSkipsCharDevices(t *testing.T) {
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	done := make(chan struct{})
	go func() { Input(f, 1<<40, time.Hour); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Input read a character device")
	}
}
