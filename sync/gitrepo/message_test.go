package gitrepo

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/commitmsg"
)

func TestChangeMessageFormat(t *testing.T) {
	var cs []memd.Change
	for i := 0; i < 25; i++ {
		op := byte("AMD"[i%3])
		cs = append(cs, memd.Change{Path: fmt.Sprintf("areas/f%02d.html", i), Op: op})
	}
	msg := ChangeMessage(cs, "box")
	lines := strings.Split(msg, "\n")
	if lines[0] != "memd: +9 ~8 -8" || lines[1] != "" {
		t.Fatalf("subject %q", lines[:2])
	}
	if lines[2] != "A areas/f00.html" || lines[3] != "M areas/f01.html" || lines[4] != "D areas/f02.html" {
		t.Fatalf("first lines %q", lines[2:5])
	}
	if lines[21] != "M areas/f19.html" || lines[22] != "… and 5 more" || lines[23] != "" {
		t.Fatalf("tail %q", lines[20:24])
	}
	if lines[24] != "Memd-Host: box" || lines[25] != "" || len(lines) != 26 {
		t.Fatalf("trailer %q", lines[24:])
	}
	if tr := commitmsg.Trailers(msg); tr[TrailerHost] != "box" || len(tr) != 1 {
		t.Fatalf("trailers %v", tr)
	}
	short := ChangeMessage([]memd.Change{{Path: "a b/ü.html", Op: 'A'}}, "h")
	if short != "memd: +1 ~0 -0\n\nA a b/ü.html\n\nMemd-Host: h\n" {
		t.Fatalf("short %q", short)
	}
}
