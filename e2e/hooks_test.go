package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// The README's memhtml recipe, for real: two machines (clones of one bare remote), each with
// `memd run` and an after_sync hook that runs `memhtml index update`. A memory written on A
// through memhtml's own write path (`memhtml apply`, which commits it itself) is pushed by
// memd on A, fetched by memd on B, and then listed by `memhtml list` on B: B's index followed
// the sync through the hook, with no manual reindex.
func TestMemhtmlIndexFollowsSyncThroughHook(t *testing.T) {
	t.Parallel()
	m := testutil.InstallMemhtml(t)
	home := t.TempDir()
	gitconfig := filepath.Join(home, "gitconfig")
	must(t, os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600))
	// memd's environment, passed to the hook through hooks.env (the rest is scrubbed):
	// memhtml offline and deterministic.
	env := append(testutil.IsolatedEnv(home, gitconfig), "MEMHTML_EMBED=off", "MEMHTML_LLM=off")
	bare := filepath.Join(home, "remote.git")
	if out, err := (testutil.Git{Env: env}).Run(home, nil, "init", "-q", "--bare", "-b", "main", bare); err != nil {
		t.Fatal(err, out)
	}

	// The recipe's wrapper: memhtml's repo is the one memd says (MEMD_REPO).
	hook := filepath.Join(home, "memhtml-index-update")
	must(t, os.WriteFile(hook, []byte("#!/bin/sh\nMEMHTML_ROOT=\"$MEMD_REPO\" exec "+m.Node+" "+m.CLI+" index update\n"), 0o755))
	config := filepath.Join(home, "memd.yaml")
	// A's quiet window outlasts memhtml's own write-then-commit, so memd never races it.
	must(t, os.WriteFile(config, []byte(`watch: {quiet: 2s, max_delay: 10s}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
sync: {pull_interval: 1s}
hooks: {after_sync: [`+hook+`], timeout: 60s, env: [MEMHTML_EMBED, MEMHTML_LLM]}
`), 0o600))
	opts := testutil.Options{Env: env, StartTimeout: startTimeout, ExitTimeout: exitTimeout, LogOnFailure: true,
		LogAlways: os.Getenv("MEMD_E2E_LOGS") != ""}
	memd := func(args ...string) {
		t.Helper()
		if out, code := testutil.Run(t, memdBin, opts, memdTimeout, args...); code != 0 {
			t.Fatalf("memd %v: exit %d\n%s", args, code, out)
		}
	}
	a, b := filepath.Join(home, "a"), filepath.Join(home, "b")
	memd("init", "--config", config, a, "--remote", bare)
	// memhtml's index is a local projection: never committed.
	f, err := os.OpenFile(filepath.Join(a, ".gitignore"), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteString("\n.memhtml/\n")
	must(t, err)
	must(t, f.Close())
	memd("sync", "--config", config, "--repo", a)
	memd("init", "--config", config, b, "--remote", bare)

	memhtml := func(root string, stdin string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(m.Node, append([]string{m.CLI}, args...)...)
		cmd.Dir = root
		// memhtml commits its writes itself, as this user.
		cmd.Env = append(env, "MEMHTML_ROOT="+root, "GIT_AUTHOR_NAME=writer", "GIT_AUTHOR_EMAIL=writer@a",
			"GIT_COMMITTER_NAME=writer", "GIT_COMMITTER_EMAIL=writer@a")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("memhtml %v in %s: %v\n%s", args, root, err, out)
		}
		return out
	}
	listed := func(root string) []string {
		var doc struct {
			Data struct {
				Files []struct {
					Path string `json:"path"`
				} `json:"files"`
			} `json:"data"`
		}
		out := memhtml(root, "", "list", "--dense")
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("memhtml list: %v\n%s", err, out)
		}
		var paths []string
		for _, f := range doc.Data.Files {
			paths = append(paths, f.Path)
		}
		return paths
	}
	if got := listed(b); len(got) != 0 {
		t.Fatalf("B lists %q before anything was written", got)
	}

	da := testutil.Start(t, memdBin, opts, "run", "--config", config, "--repo", a)
	db := testutil.Start(t, memdBin, opts, "run", "--config", config, "--repo", b)

	out := memhtml(a, `{"op":"write","title":"Pool ceiling","type":"semantic","body":"The pool ceiling is 64 connections. Measured under the nightly load test."}`+"\n", "apply", "--dense")
	var applied struct {
		Data struct {
			Results []struct {
				Path string `json:"path"`
			} `json:"results"`
			CommitSHA string `json:"commit_sha"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &applied); err != nil || len(applied.Data.Results) != 1 || applied.Data.Results[0].Path == "" {
		t.Fatalf("memhtml apply: %v\n%s", err, out)
	}
	path := applied.Data.Results[0].Path

	// memd on B fast-forwards, the hook reindexes: memhtml on B lists the memory.
	var last []string
	testutil.WaitFor(t, "memhtml list on B to show "+path, 90*time.Second, func() bool {
		last = listed(b)
		return len(last) == 1 && last[0] == path
	}, func() string { return "B lists " + strings.Join(last, ", ") + da.Describe() + db.Describe() })
	if !strings.Contains(db.Logs(), `msg="hook ran" hook=after_sync`) {
		t.Errorf("B's log has no hook run%s", db.Describe())
	}
	for _, d := range []*testutil.Daemon{da, db} {
		if code := d.Stop(); code != 0 {
			t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
		}
	}
	for _, dir := range []string{a, b} {
		if out, err := (testutil.Git{Env: env}).Run(dir, nil, "log", "--all", "--format=%H", "--", ".memhtml"); err != nil || out != "" {
			t.Errorf("%s: .memhtml was committed (%v): %s", dir, err, out)
		}
	}
}
