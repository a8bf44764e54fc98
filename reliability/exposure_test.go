package reliability

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestReliabilityExposure: non-loopback binds refused unless configured; state files 0600
// in a 0700 directory; credentials (a token in MEMD_GIT_TOKEN, a password in the remote URL)
// nowhere in what memd writes; the summarizer run as argv with no shell.
func TestReliabilityExposure(t *testing.T) {
	t.Parallel()
	t.Run("listen", exposureListen)
	t.Run("state-files", exposureStateFiles)
	t.Run("credentials", exposureCredentials)
	t.Run("summarizer-no-shell", exposureSummarizer)
}

func exposureListen(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{})
	var problems []string
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":0", "192.0.2.1:47100", "example.com:80"} {
		cfg := filepath.Join(w.home, "listen.yaml")
		must(t, os.WriteFile(cfg, []byte(fmt.Sprintf("http: {listen: %q}\n", addr)), 0o600))
		out, code := w.memdEnv(nil, time.Minute, "run", "--config", cfg, "--repo", w.repo)
		if code != 2 || !strings.Contains(out, "http.listen") || !strings.Contains(out, addr) {
			problems = append(problems, fmt.Sprintf("listen %s: exit %d, want 2 naming http.listen and the address:\n%s", addr, code, out))
		}
	}
	// Configured: allowed.
	cfg := filepath.Join(w.home, "allow.yaml")
	must(t, os.WriteFile(cfg, []byte("http: {listen: \"0.0.0.0:0\", allow_remote: true}\n"), 0o600))
	d := w.spawnArgs(nil, []string{"run", "--config", cfg, "--repo", w.repo})
	d.WaitRunning()
	if !strings.Contains(d.Logs(), "http listening") {
		problems = append(problems, "with allow_remote: true the server did not listen")
	}
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("SIGTERM: exit %d", code))
	}
	if len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
	record(t, row{Scenario: "exposure: non-loopback listen", Iterations: 6, Corruptions: len(problems), Time: time.Since(start),
		Note: "5 addresses refused with exit 2 naming http.listen; allowed with http.allow_remote"})
}

func exposureStateFiles(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{remote: true, config: fastConfig + "sleep: {catch_up: true}\n"})
	d := w.start()
	w.write("areas/state.html", "<p>state</p>\n")
	if ok, why := w.settled(settleTimeout); !ok {
		t.Fatalf("%s%s", why, d.Describe())
	}
	// Run a sleep too, so sleep.json and its caches exist.
	if out, code := w.memd("sleep", "--config", w.config, "--repo", w.repo, "--now", sleepNow); code != 0 {
		// memd run holds no lock between jobs, so this only fails for a real reason.
		t.Fatalf("memd sleep: exit %d\n%s", code, out)
	}
	check := func() []string {
		var problems []string
		dir := filepath.Join(w.repo, ".git", "memd")
		fi, err := os.Stat(dir)
		if err != nil {
			return []string{err.Error()}
		}
		if fi.Mode().Perm() != 0o700 {
			problems = append(problems, fmt.Sprintf("%s is %v, want 0700", dir, fi.Mode().Perm()))
		}
		n := 0
		_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err != nil || p == dir {
				return err
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return nil // a temp file renamed away meanwhile
			}
			n++
			want := fs.FileMode(0o600)
			if fi.IsDir() {
				want = 0o700
			}
			if fi.Mode().Perm() != want {
				problems = append(problems, fmt.Sprintf("%s is %v, want %v", p, fi.Mode().Perm(), want))
			}
			return nil
		})
		if n < 3 {
			problems = append(problems, fmt.Sprintf("only %d files in %s", n, dir))
		}
		return problems
	}
	problems := check() // while running (memd.pid, status.json, status.<format>)
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("SIGTERM: exit %d", code))
	}
	problems = append(problems, check()...)
	if len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
	record(t, row{Scenario: "exposure: state files 0600 in 0700", Iterations: 2, Corruptions: len(problems), Time: time.Since(start)})
}

func exposureCredentials(t *testing.T) {
	t.Parallel()
	start := time.Now()
	const token = "tok-SECRET-4b1d"
	const urlPass = "urlpass-SECRET-9f2e"
	home := t.TempDir()
	srvRoot := filepath.Join(home, "srv")
	must(t, os.MkdirAll(srvRoot, 0o755))
	w := newWorld(t, worldOpts{noInit: true, config: strings.Replace(fastConfig, "http: {listen: \"127.0.0.1:0\"}", "http: {listen: \"127.0.0.1:0\"}\nlog: {level: debug}", 1)})
	w.bare = filepath.Join(srvRoot, "remote.git")
	w.gitIn(w.home, "init", "-q", "--bare", "-b", "main", w.bare)
	w.gitIn(w.bare, "config", "http.receivepack", "true")
	srv := testutil.NewGitHTTPServer(t, srvRoot, token)
	if out, code := w.memd("init", "--config", w.config, w.repo); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	u := "http://memuser:" + urlPass + "@" + srv.Addr() + "/git/remote.git"
	w.gitIn(w.repo, "remote", "add", "origin", u)
	env := []string{"MEMD_GIT_TOKEN=" + token}
	var outputs []string // everything memd printed or served

	// Working credentials: commits are pushed.
	d := w.spawn(env)
	d.WaitRunning()
	w.write("areas/cred.html", "<p>pushed with a token</p>\n")
	if ok, why := w.settled(settleTimeout); !ok {
		t.Fatalf("%s%s", why, d.Describe())
	}
	grab := func() {
		for _, p := range []string{"/metrics", "/status.json", "/healthz", "/"} {
			// A page that cannot be fetched would go unchecked: that fails the test.
			_, body, err := d.Get(p)
			if err != nil {
				t.Fatalf("%v%s", err, d.Describe())
			}
			outputs = append(outputs, "GET "+p+":\n"+body)
		}
	}
	grab()
	// Failing credentials: the server wants another token now; memd reports an auth error.
	srv.SetToken("another-token")
	w.write("areas/cred2.html", "<p>push refused</p>\n")
	testutil.WaitFor(t, "state error after the auth failure", settleTimeout, func() bool { return w.status().State == "error" },
		func() string { return fmt.Sprintf("%+v%s", w.status(), d.Describe()) })
	grab()
	d.Stop()
	outputs = append(outputs, "memd run log:\n"+d.Logs())
	// One-shot commands with the failing credentials, and the status renderers.
	for _, args := range [][]string{
		{"sync", "--config", w.config, "--repo", w.repo},
		{"doctor", "--config", w.config, "--repo", w.repo},
		{"doctor", "--json", "--config", w.config, "--repo", w.repo},
		{"status", "--format", "json", "--repo", w.repo},
		{"status", "--format", "swiftbar", "--repo", w.repo},
		{"status", "--format", "sidebar", "--repo", w.repo},
	} {
		out, _ := w.memdEnv(env, time.Minute, args...)
		outputs = append(outputs, "memd "+strings.Join(args, " ")+":\n"+out)
	}
	// The state directory and the history memd wrote.
	_ = filepath.WalkDir(filepath.Join(w.repo, ".git", "memd"), func(p string, de fs.DirEntry, err error) error {
		if err == nil && !de.IsDir() {
			if b, err := os.ReadFile(p); err == nil {
				outputs = append(outputs, p+":\n"+string(b))
			}
		}
		return nil
	})
	outputs = append(outputs, "git log -p:\n"+w.git("log", "--all", "-p", "--format=%H %an <%ae>%n%B"))
	var problems []string
	sawErr := false
	for _, o := range outputs {
		for _, s := range []string{token, urlPass, url.QueryEscape(token), url.QueryEscape(urlPass)} {
			if i := strings.Index(o, s); i >= 0 {
				lo, hi := max(0, i-200), min(len(o), i+100)
				problems = append(problems, fmt.Sprintf("credential %q in %s", s, o[lo:hi]))
			}
		}
		if strings.Contains(o, "authentication failed") {
			sawErr = true
		}
	}
	if !sawErr {
		problems = append(problems, "no output mentions the authentication failure: the failing path was not exercised")
	}
	if len(problems) > 0 {
		t.Error(strings.Join(problems, "\n\n"))
	}
	record(t, row{Scenario: "exposure: credentials redacted", Iterations: len(outputs), Writes: 2, Found: 2, Corruptions: len(problems),
		Time: time.Since(start), Note: "token in MEMD_GIT_TOKEN + password in the URL; logs (debug), status, metrics, page, sync/doctor/status output, state dir, history"})
}

func exposureSummarizer(t *testing.T) {
	t.Parallel()
	start := time.Now()
	argvFile := filepath.Join(t.TempDir(), "argv")
	literal := []string{"; touch PWNED1", "$(touch PWNED2)", "`touch PWNED3`", "&& touch PWNED4", "| tee PWNED5", "> PWNED6", "*", "$HOME", "'quoted'"}
	quoted := make([]string, 0, len(literal)+1)
	for _, a := range append([]string{os.Args[0]}, literal...) {
		// "$$" is the config file's escape for a literal "$" (the loader expands $VAR and
		// ${VAR}, before YAML); what reaches the command must then be "$HOME", unexpanded.
		quoted = append(quoted, strings.ReplaceAll(fmt.Sprintf("%q", a), "$", "$$"))
	}
	w := newWorld(t, worldOpts{demo: true, config: "http: {listen: \"\"}\narcs: {summarizer: {command: [" + strings.Join(quoted, ", ") + "], timeout: 60s}}\n" +
		// The summarizer's environment is scrubbed (the hooks' rule): the helper's variables
		// pass because hooks.env names them.
		"hooks: {env: [" + helperEnv + ", MEMD_SUMMARIZER_ARGV]}\n"})
	env := []string{helperEnv + "=summarizer", "MEMD_SUMMARIZER_ARGV=" + argvFile}
	var problems []string
	out, code := w.memdEnv(env, 3*time.Minute, "sleep", "--phase", "arcs", "--now", sleepNow, "--config", w.config, "--repo", w.repo)
	if code != 0 {
		problems = append(problems, fmt.Sprintf("memd sleep --phase arcs: exit %d\n%s", code, out))
	}
	b, err := os.ReadFile(argvFile)
	if err != nil {
		problems = append(problems, "the summarizer never ran: "+err.Error())
	}
	want := fmt.Sprintf("%q", literal)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for _, l := range lines {
		if l != want {
			problems = append(problems, fmt.Sprintf("summarizer argv %s, want %s", l, want))
			break
		}
	}
	if !strings.Contains(w.git("grep", "-l", "summary from the test summarizer", "HEAD", "--", "areas/arcs"), "areas/arcs/") {
		problems = append(problems, "no arc holds the summarizer's summary")
	}
	// A command whose name is a shell line is looked up as a program name and fails; the
	// arcs are still written (deterministic part) and nothing runs.
	w2 := newWorld(t, worldOpts{demo: true, config: "http: {listen: \"\"}\narcs: {summarizer: {command: [\"echo hi; touch PWNED7\"], timeout: 60s}}\n"})
	out, code = w2.memdEnv(nil, 3*time.Minute, "sleep", "--phase", "arcs", "--now", sleepNow, "--config", w2.config, "--repo", w2.repo)
	if code != 0 && code != 1 {
		problems = append(problems, fmt.Sprintf("memd sleep with a shell line as the command: exit %d\n%s", code, out))
	}
	if !strings.Contains(w2.git("log", "--format=%s"), "sleep(arcs)") {
		problems = append(problems, "with a failing summarizer no arcs were written")
	}
	for _, dir := range []string{w.home, w.repo, w2.home, w2.repo, filepath.Dir(argvFile)} {
		_ = filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(de.Name(), "PWNED") {
				problems = append(problems, "a shell ran: "+p)
			}
			return nil
		})
	}
	if len(problems) > 0 {
		t.Error(strings.Join(problems, "\n"))
	}
	record(t, row{Scenario: "exposure: summarizer argv, no shell", Iterations: len(lines) + 1, Corruptions: len(problems),
		Time: time.Since(start), Note: "9 metacharacter args passed literally; a shell line as the program name runs nothing"})
}
