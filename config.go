package memd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Duration is a time.Duration that reads "2s" / "336h" from YAML and JSON.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes the Go duration syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads the Go duration syntax ("90s", "10m", "336h").
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("not a duration: %q (use e.g. 2s, 10m, 336h)", string(b))
	}
	*d = Duration(v)
	return nil
}

// Config is the whole memd configuration (docs/ARCHITECTURE.md §7). The yaml tags are the fixed config keys.
type Config struct {
	Repo    string        `yaml:"repo"`
	Watch   WatchConfig   `yaml:"watch"`
	Sync    SyncConfig    `yaml:"sync"`
	Lock    LockConfig    `yaml:"lock"`
	Sleep   SleepConfig   `yaml:"sleep"`
	Expire  ExpireConfig  `yaml:"expire"`
	Arcs    ArcsConfig    `yaml:"arcs"`
	Archive ArchiveConfig `yaml:"archive"`
	Tidy    TidyConfig    `yaml:"tidy"`
	HTTP    HTTPConfig    `yaml:"http"`
	Hooks   HooksConfig   `yaml:"hooks"`
	Log     LogConfig     `yaml:"log"`
	Secrets SecretsConfig `yaml:"secrets"`
	Agents  AgentsConfig  `yaml:"agents"`
	Commit  CommitConfig  `yaml:"commit"`
}

// WatchConfig: debounce windows, extra ignore patterns and the reconcile interval.
type WatchConfig struct {
	Quiet     Duration `yaml:"quiet"`
	MaxDelay  Duration `yaml:"max_delay"`
	Ignore    []string `yaml:"ignore"`
	Reconcile Duration `yaml:"reconcile"`
}

// AuthorConfig names the author of memd's commits.
type AuthorConfig struct {
	Name  string `yaml:"name"`
	Email string `yaml:"email"`
}

// SyncConfig: the remote and how to reach it.
type SyncConfig struct {
	Remote       string       `yaml:"remote"`
	Branch       string       `yaml:"branch"`
	Push         bool         `yaml:"push"`
	PullInterval Duration     `yaml:"pull_interval"`
	Author       AuthorConfig `yaml:"author"`
	SSHKey       string       `yaml:"ssh_key"`
	KnownHosts   string       `yaml:"known_hosts"`
	TokenEnv     string       `yaml:"token_env"`
	TokenFile    string       `yaml:"token_file"`
	// CheckInterval is the cheap look at the remote branch's one ref (docs/ARCHITECTURE.md §11); a fetch
	// follows only when it moved. PullInterval stays the full fetch's safety net.
	CheckInterval Duration `yaml:"check_interval"`
	// MaxFileSize bounds a blob fetched or committed; larger is refused (fetched) or held
	// (local, reason size).
	MaxFileSize ByteSize `yaml:"max_file_size"`
	// MaxDeletes is the mass deletion brake: a commit or a fetched commit deleting more than
	// this many memory files, and more than MaxDeletesShare of them, pauses instead.
	MaxDeletes int `yaml:"max_deletes"`
	// Timeout bounds each fetch or push, so a remote that hangs mid-response never stalls
	// the owner loop (added to docs/ARCHITECTURE.md §7's keys).
	Timeout Duration `yaml:"timeout"`
}

// LockConfig: the writer lock shared with memory writers (docs/FORMATS.md §5).
type LockConfig struct {
	File    string   `yaml:"file"`
	Timeout Duration `yaml:"timeout"`
}

// SleepConfig: when the nightly phases run and which.
type SleepConfig struct {
	Schedule string  `yaml:"schedule"`
	CatchUp  bool    `yaml:"catch_up"`
	Phases   []Phase `yaml:"phases"`
}

// ExpireConfig: the ledger and the soft-expiry grace.
type ExpireConfig struct {
	Ledger    string   `yaml:"ledger"`
	SoftGrace Duration `yaml:"soft_grace"`
}

// SummarizerConfig: an optional command (argv, no shell) that writes an arc's summary.
type SummarizerConfig struct {
	Command []string `yaml:"command"`
	Timeout Duration `yaml:"timeout"`
}

// ArcsConfig: how episodes group into arcs.
type ArcsConfig struct {
	Key         string           `yaml:"key"`
	MinEpisodes int              `yaml:"min_episodes"`
	Summarizer  SummarizerConfig `yaml:"summarizer"`
}

// ArchiveConfig: what ages into archive/<YYYY>/.
type ArchiveConfig struct {
	KeepYears      int      `yaml:"keep_years"`
	DoneTasksAfter Duration `yaml:"done_tasks_after"`
}

// TidyConfig: which MEMORY.md files tidy looks at.
type TidyConfig struct {
	MemoryMD []string `yaml:"memory_md"`
}

// HTTPConfig: the metrics/status listener.
type HTTPConfig struct {
	Listen string `yaml:"listen"`
	PProf  bool   `yaml:"pprof"`
	// AllowRemote permits a non-loopback listen address; off by default so a typo never
	// exposes the memory repo's status to the network.
	AllowRemote bool `yaml:"allow_remote"`
}

// HooksConfig: commands (argv, no shell) run after a step that moved HEAD, so the tools
// that read the repo (memhtml's index, a webhook) follow it. The hooks package runs them.
type HooksConfig struct {
	AfterSync   []string `yaml:"after_sync"`
	AfterSleep  []string `yaml:"after_sleep"`
	AfterCommit []string `yaml:"after_commit"`
	Timeout     Duration `yaml:"timeout"`
	// Env names environment variables passed to hooks besides the scrubbed set (docs/ARCHITECTURE.md §11).
	Env []string `yaml:"env"`
}

// SecretsConfig: the secret scan before every commit (docs/ARCHITECTURE.md §11, "Secrets never leave the
// machine"). Config names a gitleaks TOML that extends or replaces the default rules.
type SecretsConfig struct {
	Scan   bool   `yaml:"scan"`
	Config string `yaml:"config"`
}

// AgentsConfig: the memories of coding agents memd keeps in the repo beside its own.
type AgentsConfig struct {
	ClaudeCode ClaudeCodeConfig `yaml:"claude_code"`
}

// ClaudeCodeConfig: Claude Code's auto memory, kept at agents/claude-code/<project id>/
// (agents/claudecode). ConfigDir empty is $CLAUDE_CONFIG_DIR, else ~/.claude; Roots are
// folders whose git checkouts (the folder and its direct children) are projects too.
type ClaudeCodeConfig struct {
	Memory    bool     `yaml:"memory"`
	ConfigDir string   `yaml:"config_dir"`
	Roots     []string `yaml:"roots"`
}

// CommitConfig: memd's commits as `git commit` makes them (shared/DESIGN.md §10). Hooks
// false is git's --no-verify: the repo's pre-commit, commit-msg and pre-push hooks are
// skipped (prepare-commit-msg, post-commit, post-merge still run, as with git).
type CommitConfig struct {
	Hooks bool `yaml:"hooks"`
}

// Hook names, as they appear under hooks: in the config, in logs and in metric labels.
const (
	HookAfterSync   = "after_sync"
	HookAfterSleep  = "after_sleep"
	HookAfterCommit = "after_commit"
)

// HookNames lists the hooks in a fixed order.
var HookNames = []string{HookAfterSync, HookAfterSleep, HookAfterCommit}

// How a hook run ended, the result label of memd_hook_runs_total: HookResults lists them.
const (
	HookOK      = "ok"
	HookError   = "error"
	HookTimeout = "timeout"
)

// HookResults lists the hook results in label order.
var HookResults = []string{HookOK, HookError, HookTimeout}

// Argv is the command of one hook (nil when it is not configured or the name is unknown).
func (h HooksConfig) Argv(hook string) []string {
	switch hook {
	case HookAfterSync:
		return h.AfterSync
	case HookAfterSleep:
		return h.AfterSleep
	case HookAfterCommit:
		return h.AfterCommit
	}
	return nil
}

// LogConfig: level and format of the log.
type LogConfig struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// DefaultConfig returns the built-in defaults of docs/ARCHITECTURE.md §7.
func DefaultConfig() Config {
	return Config{
		Repo:  "~/memory",
		Watch: WatchConfig{Quiet: Duration(2 * time.Second), MaxDelay: Duration(30 * time.Second), Reconcile: Duration(10 * time.Minute)},
		Sync: SyncConfig{Remote: "origin", Branch: "main", Push: true, PullInterval: Duration(5 * time.Minute),
			TokenEnv: "MEMD_GIT_TOKEN", Timeout: Duration(60 * time.Second),
			CheckInterval: Duration(10 * time.Second), MaxFileSize: 100 * MiB, MaxDeletes: 50},
		Lock:    LockConfig{File: DefaultLockFile, Timeout: Duration(10 * time.Second)},
		Sleep:   SleepConfig{Schedule: "0 3 * * *", CatchUp: true, Phases: slices.Clone(SleepPhases)},
		Expire:  ExpireConfig{Ledger: DefaultLedgerFile, SoftGrace: Duration(336 * time.Hour)},
		Arcs:    ArcsConfig{Key: "entity", MinEpisodes: 3, Summarizer: SummarizerConfig{Timeout: Duration(120 * time.Second)}},
		Archive: ArchiveConfig{KeepYears: 1, DoneTasksAfter: Duration(720 * time.Hour)},
		Tidy:    TidyConfig{MemoryMD: []string{"**/MEMORY.md"}},
		HTTP:    HTTPConfig{Listen: "127.0.0.1:47100"},
		Hooks:   HooksConfig{Timeout: Duration(60 * time.Second)},
		Log:     LogConfig{Level: "info", Format: "text"},
		Secrets: SecretsConfig{Scan: true},
		Commit:  CommitConfig{Hooks: true},
	}
}

// ErrBadConfig marks a config value that cannot be used (exit 2).
var ErrBadConfig = errors.New("bad config")

// ConfigError names the key and the value that is wrong.
type ConfigError struct {
	Key, Value, Problem string
	// FromEnv names the ${VAR} references the value came from; then the value is never
	// shown (it may be a secret from the environment), only the key and its source.
	FromEnv string
}

func (e *ConfigError) Error() string {
	if e.FromEnv != "" {
		return fmt.Sprintf("config %s: the value from %s (not shown): %s", e.Key, e.FromEnv, e.Problem)
	}
	return fmt.Sprintf("config %s: %q: %s", e.Key, e.Value, e.Problem)
}

// Unwrap makes errors.Is(err, ErrBadConfig) true.
func (e *ConfigError) Unwrap() error { return ErrBadConfig }

// ScheduleValidator checks a cron spec. It is set by the sleep package's user (cmd) so this
// package need not import a cron library; nil skips the check.
type ScheduleValidator func(spec string) error

// Validate checks every value; the first problem is returned as a *ConfigError.
func (c *Config) Validate(checkSchedule ScheduleValidator) error {
	for _, check := range []func() error{
		c.validateBasics, c.validateWatch, c.validateSync,
		func() error { return c.validateSleep(checkSchedule) },
		c.validatePhases, c.validateServing, c.validateAgents,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// configErr is a *ConfigError naming the key and its value.
func configErr(key string, value any, problem string) error {
	return &ConfigError{Key: key, Value: fmt.Sprint(value), Problem: problem}
}

// validateBasics: the repo and every duration.
func (c *Config) validateBasics() error {
	if strings.TrimSpace(c.Repo) == "" {
		return configErr("repo", c.Repo, "must name the memory repo directory")
	}
	pos := []struct {
		key string
		d   Duration
	}{{"watch.quiet", c.Watch.Quiet}, {"watch.max_delay", c.Watch.MaxDelay}, {"watch.reconcile", c.Watch.Reconcile},
		{"sync.pull_interval", c.Sync.PullInterval}, {"sync.check_interval", c.Sync.CheckInterval}, {"sync.timeout", c.Sync.Timeout}, {"lock.timeout", c.Lock.Timeout},
		{"arcs.summarizer.timeout", c.Arcs.Summarizer.Timeout}, {"hooks.timeout", c.Hooks.Timeout}}
	for _, p := range pos {
		if p.d <= 0 {
			return configErr(p.key, p.d, "must be a positive duration")
		}
	}
	if c.Expire.SoftGrace < 0 {
		return configErr("expire.soft_grace", c.Expire.SoftGrace, "must not be negative")
	}
	if c.Archive.DoneTasksAfter < 0 {
		return configErr("archive.done_tasks_after", c.Archive.DoneTasksAfter, "must not be negative")
	}
	return nil
}

func (c *Config) validateWatch() error {
	if c.Watch.MaxDelay < c.Watch.Quiet {
		return configErr("watch.max_delay", c.Watch.MaxDelay, "must be at least watch.quiet ("+c.Watch.Quiet.String()+")")
	}
	for i, p := range c.Watch.Ignore {
		if strings.TrimSpace(p) == "" {
			return configErr(fmt.Sprintf("watch.ignore[%d]", i), p, "empty pattern")
		}
	}
	return nil
}

// validateSync: the remote, the commit author and the writer lock.
func (c *Config) validateSync() error {
	if c.Sync.Remote == "" || strings.ContainsAny(c.Sync.Remote, " \t/:") {
		return configErr("sync.remote", c.Sync.Remote, "must be a git remote name such as origin")
	}
	if c.Sync.Branch == "" || strings.ContainsAny(c.Sync.Branch, " \t~^:?*[\\") || strings.HasPrefix(c.Sync.Branch, "-") {
		return configErr("sync.branch", c.Sync.Branch, "must be a valid branch name")
	}
	if (c.Sync.Author.Name == "") != (c.Sync.Author.Email == "") {
		return configErr("sync.author", c.Sync.Author.Name+" <"+c.Sync.Author.Email+">", "set both name and email, or neither")
	}
	if c.Sync.MaxFileSize <= 0 {
		return configErr("sync.max_file_size", c.Sync.MaxFileSize, "must be a positive size such as 100MiB")
	}
	if c.Sync.MaxDeletes < 1 {
		return configErr("sync.max_deletes", c.Sync.MaxDeletes, "must be at least 1")
	}
	if c.Lock.File == "" || strings.Contains(c.Lock.File, "/") || c.Lock.File == "." || c.Lock.File == ".." {
		return configErr("lock.file", c.Lock.File, "must be a file name in the repo root")
	}
	return nil
}

func (c *Config) validateSleep(checkSchedule ScheduleValidator) error {
	if strings.TrimSpace(c.Sleep.Schedule) == "" {
		return configErr("sleep.schedule", c.Sleep.Schedule, "must be a cron spec such as \"0 3 * * *\" or @daily")
	}
	if checkSchedule != nil {
		if err := checkSchedule(c.Sleep.Schedule); err != nil {
			return configErr("sleep.schedule", c.Sleep.Schedule, err.Error())
		}
	}
	seen := map[Phase]bool{}
	for _, p := range c.Sleep.Phases {
		if _, err := ParsePhase(string(p)); err != nil {
			return configErr("sleep.phases", p, "unknown phase (phases: "+JoinNames(SleepPhases, ", ")+")")
		}
		if seen[p] {
			return configErr("sleep.phases", p, "listed twice")
		}
		seen[p] = true
	}
	return nil
}

// validatePhases: what the sleep phases read (the ledger, arcs, the archive, tidy).
func (c *Config) validatePhases() error {
	if c.Expire.Ledger == "" || filepath.IsAbs(c.Expire.Ledger) || strings.Contains(c.Expire.Ledger, "..") || !strings.HasSuffix(c.Expire.Ledger, ".jsonl") {
		return configErr("expire.ledger", c.Expire.Ledger, "must be a repo-relative path ending in .jsonl")
	}
	if c.Arcs.Key != "entity" && c.Arcs.Key != "tag" {
		return configErr("arcs.key", c.Arcs.Key, "must be entity or tag")
	}
	if c.Arcs.MinEpisodes < 1 {
		return configErr("arcs.min_episodes", c.Arcs.MinEpisodes, "must be at least 1")
	}
	if c.Archive.KeepYears < 0 {
		return configErr("archive.keep_years", c.Archive.KeepYears, "must not be negative")
	}
	for i, g := range c.Tidy.MemoryMD {
		if strings.TrimSpace(g) == "" || !strings.HasSuffix(g, MemoryMDName) {
			return configErr(fmt.Sprintf("tidy.memory_md[%d]", i), g, "must be a glob ending in MEMORY.md")
		}
	}
	return nil
}

// validateServing: the HTTP listener, the hooks and the log.
func (c *Config) validateServing() error {
	if c.HTTP.Listen != "" {
		host, port, err := net.SplitHostPort(c.HTTP.Listen)
		if err != nil || port == "" {
			return configErr("http.listen", c.HTTP.Listen, "must be host:port, e.g. 127.0.0.1:47100 (empty disables HTTP)")
		}
		if !c.HTTP.AllowRemote && !isLoopbackHost(host) {
			return configErr("http.listen", c.HTTP.Listen, "not a loopback address; set http.allow_remote: true to expose it")
		}
	}
	for _, h := range HookNames {
		// An empty list is no hook; a list whose command is blank is a mistake to name now,
		// not a failure on every sync.
		if argv := c.Hooks.Argv(h); len(argv) > 0 && strings.TrimSpace(argv[0]) == "" {
			return configErr("hooks."+h+"[0]", argv[0], "must name the command to run (argv, no shell: [memhtml, index, update])")
		}
	}
	for i, name := range c.Hooks.Env {
		if name == "" || strings.ContainsAny(name, "= \t\x00") {
			return configErr(fmt.Sprintf("hooks.env[%d]", i), name, "must be an environment variable name")
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return configErr("log.level", c.Log.Level, "must be debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return configErr("log.format", c.Log.Format, "must be text or json")
	}
	return nil
}

// validateAgents: the Claude Code memory's folders.
func (c *Config) validateAgents() error {
	cc := c.Agents.ClaudeCode
	if cc.ConfigDir != "" && !filepath.IsAbs(ExpandHome(cc.ConfigDir)) {
		return configErr("agents.claude_code.config_dir", cc.ConfigDir, "must be an absolute path or start with ~/")
	}
	for i, r := range cc.Roots {
		if strings.TrimSpace(r) == "" || !filepath.IsAbs(ExpandHome(r)) {
			return configErr(fmt.Sprintf("agents.claude_code.roots[%d]", i), r, "must be an absolute path or start with ~/")
		}
	}
	return nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ExpandHome turns a leading ~ into the user's home directory.
func ExpandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}

// LockPath is the absolute path of the writer lock.
func (c *Config) LockPath() string { return filepath.Join(c.Repo, c.Lock.File) }

// StateDir is <repo>/.git/memd, where memd keeps what is never committed.
func (c *Config) StateDir() string { return StateDir(c.Repo) }
