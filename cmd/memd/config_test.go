package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/memd-dev/memd"
)

// runApp runs memd in-process and returns exit code, stdout and stderr.
func runApp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
	a.now = time.Now
	code := a.main(args)
	return code, out.String(), errb.String()
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBadConfigExitsTwoNamingKeyAndValue(t *testing.T) {
	repo := t.TempDir()
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "watch:\n  quite: 2s\n", []string{"quite"}},
		{"unknown top key", "repos: /x\n", []string{"repos"}},
		{"bad duration", "watch:\n  quiet: soon\n", []string{"soon"}},
		{"wrong type", "arcs:\n  min_episodes: many\n", []string{"many"}},
		{"list for scalar", "sync:\n  remote: [a, b]\n", []string{"remote"}},
		{"negative", "arcs:\n  min_episodes: 0\n", []string{"arcs.min_episodes", "0"}},
		{"float for int", "archive:\n  keep_years: 1.5\n", []string{"archive.keep_years", "1.5"}},
		{"bad phase", "sleep:\n  phases: [expire, dream]\n", []string{"sleep.phases", "dream"}},
		{"phase case", "sleep:\n  phases: [Tidy]\n", []string{"sleep.phases", "Tidy", "unknown phase (phases: expire, arcs, archive, tidy)"}},
		{"phase twice", "sleep:\n  phases: [tidy, tidy]\n", []string{"sleep.phases", "tidy", "listed twice"}},
		{"bad level", "log:\n  level: loud\n", []string{"log.level", "loud"}},
		{"non-loopback listen", "http:\n  listen: 0.0.0.0:9\n", []string{"http.listen", "0.0.0.0:9"}},
		{"quiet over max", "watch:\n  quiet: 1m\n  max_delay: 10s\n", []string{"watch.max_delay", "10s"}},
		{"bad ledger", "expire:\n  ledger: ../x.jsonl\n", []string{"expire.ledger", "../x.jsonl"}},
		{"unknown hook", "hooks:\n  after_push: [true]\n", []string{"hooks.after_push", "unknown key"}},
		{"empty hook command", "hooks:\n  after_sync: [\"\", index]\n", []string{"hooks.after_sync[0]", "must name the command"}},
		{"blank hook command", "hooks:\n  after_sleep: [\"  \"]\n", []string{"hooks.after_sleep[0]"}},
		{"hook as one string", "hooks:\n  after_sync: memhtml index update\n", []string{"hooks.after_sync", "memhtml index update"}},
		{"hook timeout", "hooks:\n  timeout: 0s\n", []string{"hooks.timeout", "positive"}},
		{"agents memory not a bool", "agents:\n  claude_code:\n    memory: sometimes\n", []string{"memory", "sometimes"}},
		{"agents unknown agent", "agents:\n  cursor: {}\n", []string{"cursor"}},
		{"agents relative config_dir", "agents:\n  claude_code:\n    config_dir: dot-claude\n", []string{"agents.claude_code.config_dir", "dot-claude"}},
		{"agents relative root", "agents:\n  claude_code:\n    roots: [/src, work]\n", []string{"agents.claude_code.roots[1]", "work"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeConfig(t, c.yaml)
			code, _, stderr := runApp(t, "doctor", "--config", cfg, "--repo", repo)
			if code != exitUsage {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not name %q", stderr, w)
				}
			}
		})
	}
}

func TestConfigEnvExpansionAndDefaults(t *testing.T) {
	t.Setenv("MEMD_TEST_BRANCH", "trunk")
	cfg := memd.DefaultConfig()
	if err := parseConfig([]byte("sync:\n  branch: ${MEMD_TEST_BRANCH}\n  remote: up\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := parseConfig([]byte("sync:\n  author: {name: \"$HOME $$x\", email: a@b}\n"), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Sync.Author.Name != "$HOME $x" {
		t.Fatalf("a bare $NAME must stay as it is and $$ is a dollar: %q", cfg.Sync.Author.Name)
	}
	if cfg.Sync.Branch != "trunk" || cfg.Sync.Remote != "up" {
		t.Fatalf("got branch %q remote %q", cfg.Sync.Branch, cfg.Sync.Remote)
	}
	// Keys not in the file keep their defaults.
	if cfg.Watch.Quiet.D().String() != "2s" || !cfg.Sync.Push || cfg.Arcs.MinEpisodes != 3 {
		t.Fatalf("defaults lost: %+v", cfg)
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
}

func TestMissingExplicitConfigIsAnError(t *testing.T) {
	code, _, stderr := runApp(t, "doctor", "--config", filepath.Join(t.TempDir(), "nope.yaml"), "--repo", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "nope.yaml") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

func TestBadNowFlag(t *testing.T) {
	code, _, stderr := runApp(t, "doctor", "--repo", t.TempDir(), "--now", "yesterday")
	if code != exitUsage || !strings.Contains(stderr, "--now") || !strings.Contains(stderr, "yesterday") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := runApp(t, "frobnicate")
	if code != exitUsage || !strings.Contains(stderr, "frobnicate") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

// The example config in configs/ and the README's config block are real configs: they load
// with unknown keys refused, and together with the defaults they name every key of Config.
func TestExampleConfigsLoad(t *testing.T) {
	for _, p := range []string{"../../configs/config.example.yaml"} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		cfg := memd.DefaultConfig()
		if err := parseConfig(data, &cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
}

// readmeConfig returns the YAML block of the README's Configuration section.
func readmeConfig(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "## Configuration")
	if i < 0 {
		t.Fatal("README has no Configuration section")
	}
	s = s[i:]
	j := strings.Index(s, "```yaml\n")
	k := strings.Index(s[j+8:], "```")
	if j < 0 || k < 0 {
		t.Fatal("README Configuration section has no yaml block")
	}
	return []byte(s[j+8 : j+8+k])
}

func TestReadmeConfigMatchesStruct(t *testing.T) {
	block := readmeConfig(t)
	cfg := memd.DefaultConfig()
	if err := parseConfig(block, &cfg); err != nil {
		t.Fatalf("README config block does not load: %v", err)
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatalf("README config block does not validate: %v", err)
	}
	// Every key of the struct is documented.
	var doc map[string]any
	if err := yamlUnmarshal(block, &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range configKeys(reflect.TypeOf(memd.Config{}), "") {
		if !hasKey(doc, strings.Split(key, ".")) {
			t.Errorf("README config reference lacks %s", key)
		}
	}
	// And its values are the defaults, except the illustrative ones.
	def := memd.DefaultConfig()
	illustrative := map[string]bool{"watch.ignore": true, "sync.author": true}
	if cfg.Watch.Quiet != def.Watch.Quiet || cfg.Sync.PullInterval != def.Sync.PullInterval ||
		cfg.Sleep.Schedule != def.Sleep.Schedule || cfg.HTTP.Listen != def.HTTP.Listen ||
		cfg.Expire.SoftGrace != def.Expire.SoftGrace || cfg.Archive.DoneTasksAfter != def.Archive.DoneTasksAfter {
		t.Errorf("README shows values other than the defaults (illustrative keys allowed: %v)", illustrative)
	}
}

func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		out = append(out, key)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
			out = append(out, configKeys(f.Type, key+".")...)
		}
	}
	return out
}

func hasKey(m map[string]any, path []string) bool {
	v, ok := m[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		return true
	}
	sub, ok := v.(map[string]any)
	return ok && hasKey(sub, path[1:])
}

func yamlUnmarshal(b []byte, v any) error { return yaml.Unmarshal(b, v) }

// A config error never prints what ${VAR} expanded to (it may be a secret from the
// environment): only the key and the variable's name. Without ${VAR} the value is shown.
func TestConfigErrorHidesEnvValues(t *testing.T) {
	const secret = "s3cr'et@:%x-SECRETVALUE`é"
	t.Setenv("MEMD_TEST_SECRET", secret)
	t.Setenv("MEMD_TEST_NL", "a\n  b: "+secret)
	t.Setenv("MEMD_TEST_QUOTE", `"\`+secret)
	repo := t.TempDir()
	cases := []struct{ body, key string }{
		{"sync: {timeout: ${MEMD_TEST_SECRET}}\n", "sync.timeout"},
		{"sync:\n  timeout: \"5${MEMD_TEST_SECRET}\"\n", "sync.timeout"},
		{"arcs: {min_episodes: ${MEMD_TEST_SECRET}}\n", "arcs.min_episodes"},
		{"arcs: {min_episodes: \"${MEMD_TEST_SECRET}\"}\n", "arcs.min_episodes"},
		{"sync: {remote: \"${MEMD_TEST_SECRET}\"}\n", "sync.remote"},
		{"sync:\n  branch: \"x ${MEMD_TEST_SECRET}\"\n", "sync.branch"},
		{"sync: {author: {name: \"${MEMD_TEST_SECRET}\"}}\n", "sync.author"},
		{"http: {listen: \"${MEMD_TEST_SECRET}\"}\n", "http.listen"},
		{"log: {level: \"${MEMD_TEST_SECRET}\"}\n", "log.level"},
		{"sleep: {schedule: \"${MEMD_TEST_SECRET}\"}\n", "sleep.schedule"},
		{"sleep: {phases: [expire, \"${MEMD_TEST_SECRET}\"]}\n", "sleep.phases"},
		{"expire: {ledger: \"/${MEMD_TEST_SECRET}\"}\n", "expire.ledger"},
		{"lock: {file: \"a/${MEMD_TEST_SECRET}\"}\n", "lock.file"},
		{"watch: {quiet: 1s, max_delay: \"${MEMD_TEST_SECRET}\"}\n", "watch.max_delay"},
		{"watch:\n  ignore: |\n    ${MEMD_TEST_SECRET}\n", "watch.ignore"},
		{"watch: ${MEMD_TEST_NL}\n", "bad config"},                 // YAML syntax
		{"sync: {branch: \"${MEMD_TEST_QUOTE}\"}\n", "bad config"}, // YAML syntax
		{"\"${MEMD_TEST_SECRET}\": 1\n", "a key from ${MEMD_TEST_SECRET}"},
		{"sync: {remote: x, timeout: \"${MEMD_TEST_SECRET}\", branch: main}\n", "sync.timeout"},
	}
	for _, c := range cases {
		code, _, stderr := runApp(t, "doctor", "--config", writeConfig(t, c.body), "--repo", repo)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr %s", c.body, code, stderr)
			continue
		}
		for _, leak := range []string{"SECRETVALUE", "s3cr", "et@:", "-SECR"} {
			if strings.Contains(stderr, leak) {
				t.Errorf("%q: the expanded value leaks (%q): %s", c.body, leak, stderr)
			}
		}
		if !strings.Contains(stderr, c.key) || !strings.Contains(stderr, "${MEMD_TEST_") {
			t.Errorf("%q: error does not name the key %s and the variable: %s", c.body, c.key, stderr)
		}
	}
	// Not from the environment: the value is named as before.
	code, _, stderr := runApp(t, "doctor", "--config", writeConfig(t, "sync: {timeout: \"${MEMD_TEST_SECRET}\"}\nlog: {level: loud}\n"), "--repo", repo)
	if code != exitUsage || strings.Contains(stderr, "SECRETVALUE") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	code, _, stderr = runApp(t, "doctor", "--config", writeConfig(t, "sync: {pull_interval: 1m}\nlog: {level: loud}\n"), "--repo", repo)
	if code != exitUsage || !strings.Contains(stderr, `"loud"`) || !strings.Contains(stderr, "log.level") {
		t.Errorf("a plain bad value is not named: exit %d: %s", code, stderr)
	}
}
