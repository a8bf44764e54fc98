package secrets

import (
	"context"
	"fmt"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// ScanHistoryProgress counts the commits git log hands over, every thousand.
func TestScanHistoryProgress(t *testing.T) {
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	var sb strings.Builder
	for i := 0; i < 2500; i++ {
		body := fmt.Sprintf("note %d\n", i)
		fmt.Fprintf(&sb, "commit refs/heads/main\ncommitter t <t@t> %d +0000\ndata 1\nc\nM 100644 inline n.txt\ndata %d\n%s\n", 1700000000+i, len(body), body)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testutil.GitEnv(), strings.NewReader(sb.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	rs, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	if _, err := ScanHistoryProgress(context.Background(), dir, rs, func(n int) { got = append(got, n) }); err != nil {
		t.Fatal(err)
	}
	if want := []int{1000, 2000}; !reflect.DeepEqual(got, want) {
		t.Errorf("progress %v, want %v", got, want)
	}
}
