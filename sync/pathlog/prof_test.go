package pathlog

import (
	"os"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

func TestProfBig(t *testing.T) {
	dir := os.Getenv("PL_DIR")
	if dir == "" {
		t.Skip()
	}
	st := Open(dir + "/.git")
	defer st.Close()
	n := 0
	w := &Walk{Source: st, Head: plumbing.NewHash(os.Getenv("PL_HEAD")), Path: os.Getenv("PL_PATH"), Entry: func(e Entry) bool { n++; return true }}
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d entries", n)
}
