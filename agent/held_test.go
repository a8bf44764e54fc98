package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/secrets/secretstest"
)

// TestSessionScansUnlessTurnedOff: a session's commits hold a memory with a secret (the
// default), and commit it when secrets.scan is false; a secrets.config that does not parse
// fails the commit, naming the file, rather than committing unscanned.
func TestSessionScansUnlessTurnedOff(t *testing.T) {
	isolateGit(t)
	c := secretstest.New(9)
	leak := c.Dirty[0]
	for _, tc := range []struct {
		name   string
		scan   bool
		config string
		held   bool
		errHas string
	}{{"default", true, "", true, ""}, {"off", false, "", false, ""}, {"bad config", true, "bad.toml", false, "bad.toml"}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newRepo(t)
			cfg := memd.DefaultConfig()
			cfg.Repo = dir
			cfg.Secrets.Scan, cfg.Secrets.Config = tc.scan, tc.config
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, tc.config), []byte("[[rules]\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(context.Background(), cfg, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := os.MkdirAll(filepath.Join(dir, "areas"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, leak), []byte(c.Files[leak]), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = s.CommitPending(context.Background(), []string{leak})
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("commit with a bad secrets.config: %v", err)
				}
				if _, ok := committed(t, dir, leak); ok {
					t.Fatal("committed unscanned")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, ok := committed(t, dir, leak)
			if ok == tc.held {
				t.Errorf("committed %v, want %v", ok, !tc.held)
			}
			if g := s.Repo().Guarded(); (len(g) == 1) != tc.held {
				t.Errorf("guarded %+v", g)
			}
		})
	}
}
