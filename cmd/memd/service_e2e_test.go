package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestServiceEndToEnd builds memd once, into its temp dir so nothing is left behind, and
// runs the real binary in the subtests.
func TestServiceEndToEnd(t *testing.T) {
	bin := memdBinary(t)
	t.Run("RunSpeaksSdNotify", func(t *testing.T) { testRunSpeaksSdNotify(t, bin) })
	t.Run("InstalledUnitVerifies", func(t *testing.T) { testInstalledUnitVerifies(t, bin) })
}

// The real `memd run` under a fake systemd: a unixgram NOTIFY_SOCKET and WATCHDOG_USEC, and
// stderr a pipe named by JOURNAL_STREAM. It must say READY=1, ping the watchdog, say
// RELOADING=1 then READY=1 around SIGHUP, STOPPING=1 on SIGTERM, exit 0, and write journal
// lines with priority prefixes.
func testRunSpeaksSdNotify(t *testing.T, bin string) {
	home := t.TempDir()
	repo := filepath.Join(home, "memory")
	config := filepath.Join(home, "memd.yaml")
	cfg := "repo: " + repo + "\nhttp: {listen: \"\"}\nsleep: {catch_up: false}\nlog: {level: debug}\n"
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME=", "MEMD_CONFIG=",
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t",
		"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "JOURNAL_STREAM=")
	if out, err := runEnv(env, bin, "init", "--config", config, repo); err != nil {
		t.Fatalf("memd init: %v\n%s", err, out)
	}

	sockDir, err := os.MkdirTemp("", "sdn") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	sockPath := filepath.Join(sockDir, "notify")
	sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sockPath, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	msgs := make(chan string, 256)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := sock.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()

	// stderr is a pipe whose dev:ino goes into JOURNAL_STREAM, as systemd does.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(pw.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LockedBuffer{}
	logsDone := make(chan struct{})
	go func() { defer close(logsDone); _, _ = io.Copy(logs, pr) }()

	cmd := exec.Command(bin, "run", "--config", config)
	cmd.Env = append(env, "NOTIFY_SOCKET="+sockPath, "WATCHDOG_USEC=400000",
		fmt.Sprintf("JOURNAL_STREAM=%d:%d", uint64(st.Dev), uint64(st.Ino))) //nolint:unconvert
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	// expect reads messages until want arrives, counting watchdog pings on the way.
	pings := 0
	expect := func(want string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					t.Fatalf("notify socket closed waiting for %s", want)
				}
				first, _, _ := strings.Cut(m, "\n")
				if first == "WATCHDOG=1" {
					pings++
				}
				if first == want {
					return
				}
			case err := <-exited:
				t.Fatalf("memd run exited (%v) before %s; log:\n%s", err, want, logs.String())
			case <-deadline:
				t.Fatalf("no %s within 20s (pings %d); log:\n%s", want, pings, logs.String())
			}
		}
	}
	expect("READY=1")
	expect("WATCHDOG=1")
	expect("WATCHDOG=1")
	if pings < 2 {
		t.Fatalf("pings = %d", pings)
	}

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expect("RELOADING=1")
	expect("READY=1")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("memd run after SIGTERM: %v; log:\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("memd run did not exit after SIGTERM; log:\n%s", logs.String())
	}
	<-logsDone

	out := logs.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("memd run logged nothing")
	}
	for _, l := range lines {
		if len(l) < 3 || l[0] != '<' || !strings.Contains("3467", string(l[1])) || l[2] != '>' {
			t.Fatalf("not a journal line: %q\nlog:\n%s", l, out)
		}
		if strings.Contains(l, "time=") {
			t.Fatalf("journal line carries a timestamp: %q", l)
		}
	}
}

func runEnv(env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return cmd.CombinedOutput()
}

// The real binary, started through a symlink, installs a unit whose ExecStart is the
// resolved binary and which systemd-analyze accepts as a user unit.
func testInstalledUnitVerifies(t *testing.T, bin string) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found and CI is set")
		}
		t.Skip("systemd-analyze not installed")
	}
	home := t.TempDir()
	link := filepath.Join(home, "bin", "memd")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(home, "memory")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(home, "memd.yaml")
	if err := os.WriteFile(config, []byte("repo: "+repo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME=", "MEMD_CONFIG="+config)
	out, err := runEnv(env, link, "service", "install", "--systemd")
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	unit := filepath.Join(home, ".config", "systemd", "user", "memd.service")
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	realBin, _ := filepath.EvalSymlinks(bin)
	if want := "ExecStart=" + realBin + " run --config " + config + "\n"; !strings.Contains(string(data), want) {
		t.Fatalf("unit lacks %q:\n%s", want, data)
	}
	cmd := exec.Command(analyze, "--user", "--man=false", "verify", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	if vout, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(vout)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, vout)
	}
	out, err = runEnv(env, link, "service", "uninstall", "--systemd")
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Fatalf("unit still there: %v", err)
	}
}
