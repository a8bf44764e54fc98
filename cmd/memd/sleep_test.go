package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/demo"
)

const sleepNow = "2026-11-30T03:00:00Z"

func sleepGitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
}

func sleepGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = sleepGitEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// demoRepo generates a demo memory repo spanning 2023..2026 and commits it with git.
func demoRepo(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "memory")
	now, _ := time.Parse(time.RFC3339, sleepNow)
	if _, err := demo.Generate(dir, demo.Options{Memories: n, Now: now, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	sleepGit(t, dir, "init", "-q", "-b", "main")
	sleepGit(t, dir, "add", "-A")
	sleepGit(t, dir, "commit", "-q", "-m", "demo")
	return dir
}

// copyRepo copies a repo (work tree and .git) with cp -a.
func copyRepo(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return dst
}

func runMemd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("MEMD_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), now: time.Now}
	code = a.main(args)
	return code, out.String(), errb.String()
}

func digestTree(t *testing.T, dir string) string {
	t.Helper()
	var paths []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			paths = append(paths, rel)
		}
		return nil
	})
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		b, _ := os.ReadFile(filepath.Join(dir, p))
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestSleepCommand(t *testing.T) {
	dir := demoRepo(t, 300)
	before := digestTree(t, dir)
	head0 := sleepGit(t, dir, "rev-parse", "HEAD")

	code, out, errs := runMemd(t, "sleep", "--repo", dir, "--now", sleepNow, "--dry-run", "--no-gc")
	if code != 0 {
		t.Fatalf("dry run exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "dry run") || !strings.Contains(out, "  move ") || !strings.Contains(out, "archived=") {
		t.Errorf("dry-run output lacks the plan:\n%s", out)
	}
	if digestTree(t, dir) != before || sleepGit(t, dir, "rev-parse", "HEAD") != head0 {
		t.Fatal("--dry-run wrote")
	}

	for _, bad := range []string{"dream", "Tidy"} { // names are case-sensitive, as config spells them
		code, _, errs = runMemd(t, "sleep", "--repo", dir, "--phase", "expire,"+bad)
		want := `memd: sleep: --phase: unknown sleep phase "` + bad + `" (phases: expire, arcs, archive, tidy)`
		if code != 2 || !strings.Contains(errs, want) {
			t.Fatalf("unknown phase: exit %d, stderr %q (want 2 and %q)", code, errs, want)
		}
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("sleep:\n  schedule: \"every night\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runMemd(t, "sleep", "--config", cfg, "--repo", dir)
	if code != 2 || !strings.Contains(errs, "every night") {
		t.Fatalf("bad schedule: exit %d, stderr %q (want 2 naming it)", code, errs)
	}

	// --phase order on the command line does not matter: canonical order.
	code, out, errs = runMemd(t, "sleep", "--repo", dir, "--now", sleepNow, "--json", "--no-gc", "--phase", "arcs", "--phase", "expire")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep struct {
		Run    string `json:"run"`
		Phases []struct {
			Phase  string         `json:"phase"`
			Commit string         `json:"commit"`
			Counts map[string]int `json:"counts"`
		} `json:"phases"`
		Counts map[string]int `json:"counts"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if len(rep.Phases) != 2 || rep.Phases[0].Phase != "expire" || rep.Phases[1].Phase != "arcs" || rep.Run != "20261130T030000Z" {
		t.Fatalf("phases %+v run %s", rep.Phases, rep.Run)
	}
	if rep.Counts["arcs"] == 0 || rep.Phases[1].Commit == "" {
		t.Errorf("demo repo made no arcs: %s", out)
	}

	// The rest of the night, then the same command again: nothing more.
	code, out, errs = runMemd(t, "sleep", "--repo", dir, "--now", sleepNow, "--no-gc")
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	if !strings.Contains(out, "expire   already committed") || !strings.Contains(out, "archive  archived=") {
		t.Errorf("output:\n%s", out)
	}
	h := sleepGit(t, dir, "rev-parse", "HEAD")
	code, out, _ = runMemd(t, "sleep", "--repo", dir, "--now", "2026-11-30T04:00:00Z", "--no-gc")
	if code != 0 || sleepGit(t, dir, "rev-parse", "HEAD") != h {
		t.Fatalf("a second night with nothing to do committed (exit %d):\n%s", code, out)
	}
	if strings.Contains(out, "(commit ") || strings.Count(out, "nothing to do") < 3 {
		t.Errorf("second night output:\n%s", out)
	}
	if st := sleepGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("not clean:\n%s", st)
	}
}

// `memd sleep` as a real process, SIGKILLed while a phase is being applied, then run again
// with the same --now: the tree ends as after an uninterrupted run.
// Slow on a small machine (a demo repo, three copies, three runs): MEMD_LONG=1. The sleep
// package's TestKilledRunResumesToSameTree covers the same with a helper process by default.
func TestSleepKilledProcessResumes(t *testing.T) {
	if os.Getenv("MEMD_LONG") == "" {
		t.Skip("set MEMD_LONG=1 to run memd sleep as a real process and SIGKILL it")
	}
	bin := memdBinary(t)
	orig := demoRepo(t, 1500)
	want, got := copyRepo(t, orig), copyRepo(t, orig)
	env := append(sleepGitEnv(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())

	cmd := exec.Command(bin, "sleep", "--repo", want, "--now", sleepNow, "--no-gc")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, out)
	}

	journal := filepath.Join(got, ".git", "memd", "sleep-journal", "journal.json")
	cmd = exec.Command(bin, "sleep", "--repo", got, "--now", sleepNow, "--no-gc", "--phase", "archive")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	killed := false
	for !killed {
		select {
		case err := <-exited:
			t.Fatalf("memd sleep finished (%v) before it could be killed mid-apply:\n%s", err, out.String())
		default:
		}
		if _, err := os.Stat(journal); err == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		} else {
			time.Sleep(200 * time.Microsecond)
		}
	}
	<-exited
	if st := sleepGit(t, got, "status", "--porcelain"); st == "" {
		t.Log("killed before the first op of the apply")
	}
	cmd = exec.Command(bin, "sleep", "--repo", got, "--now", sleepNow, "--no-gc")
	cmd.Env = env
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("resumed run: %v\n%s", err, o)
	}
	if digestTree(t, got) != digestTree(t, want) {
		t.Fatal("killed+resumed tree differs from the uninterrupted one")
	}
	if a, b := sleepGit(t, got, "rev-parse", "HEAD^{tree}"), sleepGit(t, want, "rev-parse", "HEAD^{tree}"); a != b {
		t.Fatalf("HEAD trees differ: %s vs %s", a, b)
	}
}

// At the default log level a dry run prints the plan and nothing else: no log line per
// phase on stderr (with --config's log.level: debug they come back).
func TestSleepDryRunPrintsOnlyThePlan(t *testing.T) {
	dir := demoRepo(t, 60)
	code, out, errs := runMemd(t, "sleep", "--repo", dir, "--now", sleepNow, "--dry-run", "--no-gc")
	if code != 0 || !strings.Contains(out, "dry run") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if errs != "" {
		t.Errorf("stderr of a dry run at the default level:\n%s", errs)
	}
	cfg := writeConfig(t, "log: {level: debug}\n")
	if _, _, errs := runMemd(t, "sleep", "--config", cfg, "--repo", dir, "--now", sleepNow, "--dry-run", "--no-gc"); !strings.Contains(errs, `msg="sleep phase"`) {
		t.Errorf("debug level lost the phase lines:\n%s", errs)
	}
}
