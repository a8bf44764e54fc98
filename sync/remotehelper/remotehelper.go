// Package remotehelper reaches the remotes git reaches through a remote helper
// (gitremote-helpers(7)): a URL `<transport>::<address>` (git-remote-gcrypt, codecommit, …),
// a `<scheme>://` URL of a scheme git does not speak itself (s3://, keybase://), or a remote
// with remote.<name>.vcs set. memd speaks no helper protocol of its own: the fetch, the look
// (sync.check_interval) and the push run the git binary (`git fetch`, `git ls-remote`,
// `git push`) on the remote's name, so git's config decides as it does for the user's own
// git, and memd never takes the address apart: the transport's name is never resolved as a
// host (docs/ARCHITECTURE.md §11 "Remote helpers"). What comes in is vetted by the caller as any fetch is
// (sync/gitrepo: internal/gitpath's tree checks before a merge or checkout).
package remotehelper

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/sync/gitremote"
)

// nativeSchemes are the `<scheme>://` URLs memd reaches itself; git runs a helper for any
// other scheme (transport.c: transport_get). git's own http(s) go through its
// git-remote-http, memd's through its own client, so they are native here.
var nativeSchemes = map[string]bool{"file": true, "git": true, "ssh": true, "git+ssh": true, "ssh+git": true,
	"http": true, "https": true}

// For is the name of the helper git runs for a remote with url and remote.<name>.vcs
// (git-remote-<name>), "" when memd reaches it itself. git's rules (transport_get): vcs
// first; then `<transport>::` where the transport is a letter followed by letters, digits,
// '+', '-' or '.'; then a `<scheme>://` git does not speak natively.
func For(url, vcs string) string {
	if vcs != "" {
		return vcs
	}
	n := schemeLen(url)
	if n == 0 {
		return ""
	}
	switch rest := url[n:]; {
	case strings.HasPrefix(rest, "::"):
		return url[:n]
	case strings.HasPrefix(rest, "://") && !nativeSchemes[url[:n]]:
		return url[:n]
	}
	return ""
}

// schemeLen is the length of the leading run of characters git's is_urlschemechar takes.
func schemeLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return i
		}
	}
	return len(s)
}

// Remote is one remote of one repo reached through its helper.
type Remote struct {
	Dir    string // the work tree: git runs there, as the user's `git fetch` would
	Name   string // the remote's name: git reads its URL, helper and the helper's keys
	URL    string // as configured, for messages only (always redacted)
	Helper string // For's answer
	// Deny names environment variables never passed on (sync.token_env).
	Deny    []string
	Timeout time.Duration // per git run; 0 = none beyond ctx
}

// Fetch runs `git fetch` of the branch into refs/remotes/<name>/<branch> (forced, as git's
// default refspec is). found is false when the remote has no such branch: an empty remote,
// which the first push makes.
func (rm Remote) Fetch(ctx context.Context, branch string) (found bool, err error) {
	if err := rm.check(branch); err != nil {
		return false, err
	}
	spec := "+refs/heads/" + branch + ":refs/remotes/" + rm.Name + "/" + branch
	out, err := rm.run(ctx, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-auto-maintenance",
		"--recurse-submodules=no", rm.Name, spec)
	if err != nil && strings.Contains(out, "couldn't find remote ref refs/heads/"+branch) {
		return false, nil
	}
	if err != nil {
		return false, rm.classify(ctx, "fetch", out, err)
	}
	return true, nil
}

// Head is where the remote's branch is (`git ls-remote <name> refs/heads/<branch>`), "" when
// it has no such branch.
func (rm Remote) Head(ctx context.Context, branch string) (string, error) {
	if err := rm.check(branch); err != nil {
		return "", err
	}
	ref := "refs/heads/" + branch
	out, err := rm.run(ctx, "ls-remote", "--heads", rm.Name, ref)
	if err != nil {
		return "", rm.classify(ctx, "look at", out, err)
	}
	for _, line := range strings.Split(out, "\n") {
		hash, name, ok := strings.Cut(strings.TrimSpace(line), "\t")
		if ok && name == ref && isHex(hash) {
			return hash, nil
		}
	}
	return "", nil
}

// Push runs `git push <name> <local>:refs/heads/<branch>`: never forced, so git refuses
// what is not a fast-forward of the branch as the helper lists it (gitremote.ErrPushRejected:
// the caller fetches, merges and pushes again). The repo's pre-push hook runs, as under git.
func (rm Remote) Push(ctx context.Context, local, branch string) error {
	if err := rm.check(branch); err != nil {
		return err
	}
	if !isHex(local) {
		return fmt.Errorf("push %s: %q is not a commit id", rm.Name, local)
	}
	out, err := rm.run(ctx, "push", "--porcelain", "--recurse-submodules=no", rm.Name, local+":refs/heads/"+branch)
	if err == nil {
		return nil
	}
	if status := rejectedStatus(out); status != "" {
		// The remote (or git, for a non-fast-forward) refused the update: a race or a
		// refusal of its own, sorted as every push's (gitremote.Classify).
		return gitremote.Classify("push", rm.what(), gitremote.RedactURL(rm.URL), &gitremote.Refusal{Status: status, Remote: remoteSaid(out)})
	}
	return rm.classify(ctx, "push", out, err)
}

// rejectedStatus is the verdict of a refused ref in `git push --porcelain` output
// ("!\t<src>:<dst>\t[rejected] (fetch first)"), "" if there is none.
func rejectedStatus(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.SplitN(line, "\t", 3); len(f) == 3 && f[0] == "!" {
			return strings.TrimSpace(f[2])
		}
	}
	return ""
}

// remoteSaid is what the remote said on its side ("remote: ..." lines).
func remoteSaid(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "remote:") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

func isHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// check refuses a remote or branch name git would take for an option.
func (rm Remote) check(branch string) error {
	if rm.Name == "" || strings.HasPrefix(rm.Name, "-") || branch == "" || strings.HasPrefix(branch, "-") {
		return fmt.Errorf("remote %q, branch %q: not names git takes for a remote and a branch", rm.Name, branch)
	}
	return nil
}

// what names the remote and its helper in messages.
func (rm Remote) what() string { return rm.Name + " through git-remote-" + rm.Helper }

// gitPath is the git binary; "" = not installed. A variable for tests.
var gitPath = func() string { p, _ := exec.LookPath("git"); return p }

// ErrNoGit: a remote helper is run through git, and there is none.
var ErrNoGit = errors.New("git is not installed (a remote helper is run through it)")

// maxOutput bounds what a run may print on stdout (one ref's line, a push's porcelain).
const maxOutput = 1 << 20

// run runs git in rm.Dir with the helper's environment; the result is stdout and the tail
// of stderr, together (classify reads both).
func (rm Remote) run(ctx context.Context, args ...string) (string, error) {
	git := gitPath()
	if git == "" {
		return "", fmt.Errorf("%s %s: %w", args[0], rm.what(), ErrNoGit)
	}
	res := procgroup.Run(ctx, append([]string{git}, args...), procgroup.Options{
		Dir: rm.Dir, Env: Env(os.Environ(), rm.Deny), Timeout: rm.Timeout, MaxOutput: maxOutput, StderrTail: 8 << 10,
	})
	out := string(res.Output)
	if len(res.Tail) > 0 {
		out += "\n" + string(res.Tail)
	}
	return out, res.Err
}

// passEnv are the variables a helper gets beside procgroup.BaseEnv: where gpg keeps its
// keys and agent (git-remote-gcrypt), the ssh agent, git's own config and ssh settings, and
// the proxies and CA files of curl; passPrefixes the families of them (the
// GIT_CONFIG_KEY_n/VALUE_n pairs, the AWS keys of codecommit and s3 helpers, gcrypt's and
// rclone's settings). Never memd's token (procgroup.TokenVar, sync.token_env), nor
// GIT_DIR and the like a hook's environment would point elsewhere, nor DISPLAY or GPG_TTY:
// no prompt, no pinentry window, comes from memd.
var (
	passEnv = []string{"GNUPGHOME", "GPG_AGENT_INFO", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "SSH_AUTH_SOCK",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSH_VARIANT", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
		"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY", "GIT_EXEC_PATH",
		"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
		"SSL_CERT_FILE", "SSL_CERT_DIR"}
	passPrefixes = []string{"GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_", "AWS_", "GCRYPT_", "RCLONE_"}
)

// Env is the environment of a helper's git: memd's scrubbed one (procgroup.ScrubEnv) with
// what a helper needs (passEnv), never a name in deny; no prompt of any kind, and git's and
// the helper's words in English (classify reads them).
func Env(environ, deny []string) []string {
	allow := append([]string(nil), passEnv...)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		for _, p := range passPrefixes {
			if strings.HasPrefix(name, p) {
				allow = append(allow, name)
			}
		}
	}
	return append(procgroup.ScrubEnv(environ, allow, deny),
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GCM_INTERACTIVE=never", "LC_ALL=C", "LANGUAGE=")
}

// Installed reports whether git would find git-remote-<helper>: in git's exec path or on
// PATH, as git looks for it.
func Installed(helper string) bool {
	name := "git-remote-" + helper
	if git := gitPath(); git != "" {
		if out, err := exec.Command(git, "--exec-path").Output(); err == nil {
			if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), name)); err == nil && !fi.IsDir() {
				return true
			}
		}
	}
	_, err := exec.LookPath(name)
	return err == nil
}

// maxWords caps what of a helper's words reaches an error, a log or the status.
const maxWords = 600

// classify turns a failed run into an error: the kinds (gitremote.ErrOffline for an
// address or network that does not answer, ErrAuth, context errors) from the whole output
// by gitremote's rules, the message from the helper's own words, redacted.
func (rm Remote) classify(ctx context.Context, op, out string, runErr error) error {
	if errors.Is(runErr, ErrNoGit) {
		return runErr
	}
	if errors.Is(runErr, procgroup.ErrTimeout) || ctx.Err() != nil {
		cause := ctx.Err()
		if cause == nil {
			cause = context.DeadlineExceeded
		}
		return &Error{msg: gitremote.RedactURL(fmt.Sprintf("%s %s (%s): %v: %v after %s", op, rm.what(), rm.URL,
			gitremote.ErrOffline, cause, rm.Timeout)), kinds: []error{gitremote.ErrOffline, cause}}
	}
	words, kinds := Words(out)
	switch {
	case strings.Contains(out, "'remote-"+rm.Helper+"' is not a git command"):
		words = "git-remote-" + rm.Helper + " is not installed (" + words + ")"
	case words == "":
		words = runErr.Error()
	}
	prefix := ""
	if len(kinds) > 0 && !strings.Contains(words, kinds[0].Error()) {
		prefix = kinds[0].Error() + ": "
	}
	return &Error{msg: gitremote.RedactURL(fmt.Sprintf("%s %s (%s): %s%s", op, rm.what(), rm.URL, prefix, words)), kinds: kinds}
}

// Error is a helper's failure: a message already redacted and a chain that exposes only
// the kinds (gitremote.ErrOffline, ErrAuth, context errors).
type Error struct {
	msg   string
	kinds []error
}

func (e *Error) Error() string   { return e.msg }
func (e *Error) Unwrap() []error { return e.kinds }

// chatter are lines git, gpg and git-remote-gcrypt print on any run, failed or not: never
// the words that say why one failed.
var chatter = []string{"Please make sure you have the correct access rights", "and the repository exists.",
	"hint:", "error: failed to push some refs", "To ", "Done", "gcrypt: Decrypting manifest", "gcrypt: Remote ID is",
	"gcrypt: Due to a longstanding bug", "gcrypt: Consider explicitly passing", "gcrypt: gcrypt's require-explicit",
	"gcrypt: Encrypting to", "gcrypt: Requesting manifest signature", "gcrypt: Setting up new repository",
	"gpg: Signature made", "gpg:                using", "gpg: Good signature", "gpg: error getting version from 'scdaemon'",
	"gpg: WARNING: \"--secret-keyring\" is an obsolete option"}

// Words are a helper's own words for why a run failed: its last meaningful line (not
// chatter), preceded by the line that decided the kind when that one stands higher (a
// network error above git-remote-gcrypt's "Aborting."); and the kinds that line decided.
func Words(out string) (string, []error) {
	var lines []string
	for _, l := range strings.FieldsFunc(out, func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(l)
		if l != "" && !isChatter(l) {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "", nil
	}
	last := lines[len(lines)-1]
	for i := len(lines) - 1; i >= 0; i-- {
		if kinds := kindsOf(lines[i]); len(kinds) > 0 {
			if i == len(lines)-1 {
				return capWords(last), kinds
			}
			return capWords(lines[i] + " | " + last), kinds
		}
	}
	return capWords(last), nil
}

func isChatter(l string) bool {
	for _, c := range chatter {
		if strings.HasPrefix(l, c) {
			return true
		}
	}
	return false
}

// kindsOf is what gitremote.Classify makes of one line: offline, an auth failure, or none.
func kindsOf(line string) []error {
	probe := gitremote.Classify("fetch", "", "", errors.New(line))
	for _, k := range []error{gitremote.ErrAuth, gitremote.ErrOffline} {
		if errors.Is(probe, k) {
			return []error{k}
		}
	}
	return nil
}

func capWords(s string) string {
	if len(s) <= maxWords {
		return s
	}
	cut := maxWords
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Info says how a remote is reached, for `memd doctor`.
type Info struct {
	Remote    string `json:"remote"`
	URL       string `json:"url"`    // after url.<base>.insteadOf, redacted
	Helper    string `json:"helper"` // "" = memd reaches it itself
	Installed bool   `json:"installed"`
}

// Describe asks git how the remote name of the repo at dir is reached: its URL after
// insteadOf (`git ls-remote --get-url`, which reaches nothing) and remote.<name>.vcs. ok is
// false when git or the remote is missing.
func Describe(ctx context.Context, dir, name string) (Info, bool) {
	git := gitPath()
	if git == "" || name == "" || strings.HasPrefix(name, "-") {
		return Info{}, false
	}
	ask := func(args ...string) string {
		c := exec.CommandContext(ctx, git, args...)
		c.Dir, c.Env = dir, Env(os.Environ(), nil)
		out, _ := c.Output()
		return strings.TrimSpace(string(out))
	}
	vcs := ask("config", "--get", "remote."+name+".vcs")
	if vcs == "" && ask("config", "--get", "remote."+name+".url") == "" {
		return Info{}, false
	}
	url := ask("ls-remote", "--get-url", name)
	in := Info{Remote: name, URL: gitremote.RedactURL(url), Helper: For(url, vcs)}
	if in.Helper != "" {
		in.Installed = Installed(in.Helper)
	}
	return in, true
}
