package main

import (
	"os"
	"sync"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

var (
	binOnce   sync.Once
	binPath   string
	binRemove = func() {}
	binErr    error
)

// memdBinary builds memd once for every real-process test of this package; TestMain
// removes it.
func memdBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binPath, binRemove, binErr = testutil.BuildMemd() })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	binRemove()
	os.Exit(code)
}
