package service

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memd-dev/memd/internal/safefs"
)

// The files here (systemd unit, launchd plist, their backups and log folder) live in the
// user's own config and home directories, never in the memory repo: nothing a remote sends
// can name or reach them, so they are written with plain os calls, not internal/safefs.

// ErrForeign is returned when the file at the unit path was not written by memd service
// install; Options.Force replaces or removes it, keeping it as a backup.
var ErrForeign = errors.New("not written by memd service install")

// Env is where the service files go: the user's home, $XDG_CONFIG_HOME and uid (launchctl
// domains are per uid). Taking it as a value lets tests point it at a temp dir.
type Env struct {
	Home          string
	XDGConfigHome string // "" or relative: $HOME/.config (XDG base dir spec)
	UID           int
}

// EnvFromOS reads $HOME, $XDG_CONFIG_HOME and the uid.
func EnvFromOS() (Env, error) {
	home := os.Getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return Env{}, fmt.Errorf("home directory: %w", err)
		}
		home = h
	}
	return Env{Home: home, XDGConfigHome: os.Getenv("XDG_CONFIG_HOME"), UID: os.Getuid()}, nil
}

// UnitPath is where the service file lives: $XDG_CONFIG_HOME/systemd/user/memd.service
// (~/.config/systemd/user/memd.service) or ~/Library/LaunchAgents/<label>.plist.
func UnitPath(k Kind, e Env, label string) (string, error) {
	if label == "" {
		label = DefaultLabel
	}
	if !filepath.IsAbs(e.Home) {
		return "", fmt.Errorf("%w: home %q is not an absolute path (set $HOME)", ErrBadParams, e.Home)
	}
	switch k {
	case Systemd:
		cfg := e.XDGConfigHome
		if !filepath.IsAbs(cfg) {
			cfg = filepath.Join(e.Home, ".config")
		}
		return filepath.Join(cfg, "systemd", "user", UnitName), nil
	case Launchd:
		if !labelOK(label) {
			return "", fmt.Errorf("%w: launchd label %q", ErrBadParams, label)
		}
		return filepath.Join(e.Home, "Library", "LaunchAgents", label+".plist"), nil
	}
	return "", fmt.Errorf("%w: unknown service manager %q (systemd or launchd)", ErrBadParams, k)
}

// Options change how Install and Uninstall treat a file they did not write.
type Options struct {
	// Force replaces (install) or removes (uninstall) a foreign file; it is kept beside
	// the unit path as <name>.bak (then .bak.1, …), never deleted.
	Force bool
}

// Action says what Install or Uninstall did to the file.
type Action string

// The actions.
const (
	Created   Action = "created"
	Updated   Action = "updated"
	Unchanged Action = "unchanged"
	Removed   Action = "removed"
	Absent    Action = "absent" // uninstall found nothing to remove
)

// Command is one service-manager command to run after Install or Uninstall. MayFail marks
// a command whose failure is expected in some states (stopping what is not running).
type Command struct {
	Argv    []string
	MayFail bool
}

// String is the command as a shell line.
func (c Command) String() string { return ShellJoin(c.Argv) }

// Result reports what Install or Uninstall did and what to run next.
type Result struct {
	Kind   Kind
	Path   string
	Action Action
	// Backup is where a foreign file was kept when Force replaced or removed it.
	Backup string
	// Removed lists other files removed with the unit (systemd *.wants/ links to it).
	Removed []string
	// Also says what else was written beside Path ("updated …/memd@.service").
	Also []string
	// Next are the commands that enable and start (install) or stop (uninstall) the
	// service; Install and Uninstall never run them.
	Next []Command
}

// Install writes the unit or plist rendered from p to its path under e. It is idempotent:
// the same p again leaves the file as it is (Unchanged). It replaces a file only when that
// file carries Marker, unless opt.Force.
func Install(k Kind, p Params, e Env, opt Options) (Result, error) {
	if p.Home == "" {
		p.Home = e.Home
	}
	path, err := UnitPath(k, e, p.Label)
	if err != nil {
		return Result{}, err
	}
	res := Result{Kind: k, Path: path}
	data, err := Render(k, p)
	if err != nil {
		return res, err
	}
	if k == Launchd {
		// launchd opens the log file but does not create its directory.
		if err := os.MkdirAll(filepath.Dir(p.LogFile()), 0o755); err != nil {
			return res, fmt.Errorf("log directory: %w", err)
		}
	}
	if res.Action, res.Backup, err = place(path, data, opt); err != nil {
		return res, err
	}
	res.Next = startCommands(k, path, p.label(), e.UID, res.Action)
	return res, nil
}

// Uninstall removes the unit or plist under e (and, for systemd, the *.wants/ links that
// `systemctl enable` made to it). Nothing there is not an error (Absent). A file without
// Marker is left alone unless opt.Force, which moves it aside as a backup.
func Uninstall(k Kind, e Env, label string, opt Options) (Result, error) {
	if label == "" {
		label = DefaultLabel
	}
	path, err := UnitPath(k, e, label)
	if err != nil {
		return Result{}, err
	}
	res := Result{Kind: k, Path: path}
	if res.Action, res.Backup, err = removeOurs(path, opt); err != nil {
		return res, err
	}
	if k == Systemd {
		links, err := removeWantsLinksNamed(filepath.Dir(path), UnitName, path)
		res.Removed = links
		if err != nil {
			return res, err
		}
	}
	res.Next = stopCommands(k, label, e.UID)
	return res, nil
}

type fileState int

const (
	fileMissing fileState = iota
	fileOurs
	fileForeign
)

// inspect classifies the file at path. A symlink is always foreign: memd never writes one,
// and writing through it would edit someone's dotfiles.
func inspect(path string) ([]byte, fileState, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fileMissing, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("inspect %s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, 0, fmt.Errorf("%s is a directory", path)
	}
	if !fi.Mode().IsRegular() {
		return nil, fileForeign, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	head := data
	if len(head) > 1024 {
		head = head[:1024]
	}
	if bytes.Contains(head, []byte(Marker)) {
		return data, fileOurs, nil
	}
	return data, fileForeign, nil
}

func backupName(path string) string {
	b := path + ".bak"
	for i := 1; ; i++ {
		if _, err := os.Lstat(b); errors.Is(err, fs.ErrNotExist) {
			return b
		}
		b = path + ".bak." + strconv.Itoa(i)
	}
}

// backup moves a foreign file aside under a free .bak name (a rename keeps a symlink a
// symlink).
func backup(path string) (string, error) {
	b := backupName(path)
	if err := os.Rename(path, b); err != nil {
		return "", fmt.Errorf("keep %s as %s: %w", path, b, err)
	}
	return b, nil
}

// writeAtomic writes data beside path and renames it over (internal/safefs: memd's one
// atomic write), so a crash leaves the old file or the new one, never half of one.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	t, err := safefs.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer t.Close()
	if err := t.WriteFileAtomic(filepath.Base(path), data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// 0644 whatever the umask, as systemd and launchd expect of a unit.
	if err := t.Chmod(filepath.Base(path), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_ = t.SyncDir(".")
	return nil
}

// removeWantsLinksNamed removes <dir>/*.wants/<name> links that point at unit (an
// instance's link points at the template), which is what `systemctl --user disable` would
// do: after the unit file is gone systemctl can no longer read its [Install] section.
func removeWantsLinksNamed(dir, name, unit string) ([]string, error) {
	// The name is not a pattern: an instance name holds \x escapes, which Glob would read.
	wants, err := filepath.Glob(filepath.Join(dir, "*.wants"))
	if err != nil {
		return nil, err
	}
	var matches []string
	for _, w := range wants {
		matches = append(matches, filepath.Join(w, name))
	}
	var removed []string
	for _, m := range matches {
		target, err := os.Readlink(m)
		if err != nil {
			continue // not a link: not systemctl's, leave it
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(m), target)
		}
		if filepath.Clean(target) != filepath.Clean(unit) {
			continue
		}
		if err := os.Remove(m); err != nil {
			return removed, fmt.Errorf("remove %s: %w", m, err)
		}
		removed = append(removed, m)
	}
	return removed, nil
}

func startCommands(k Kind, path, label string, uid int, a Action) []Command {
	if k == Launchd {
		boot := Command{Argv: []string{"launchctl", "bootstrap", "gui/" + strconv.Itoa(uid), path}}
		if a == Created {
			return []Command{boot}
		}
		// bootstrap refuses a label that is loaded: unload the old one first.
		return []Command{{Argv: []string{"launchctl", "bootout", "gui/" + strconv.Itoa(uid) + "/" + label}, MayFail: true}, boot}
	}
	return startUnitCommands(UnitName, a)
}

func startUnitCommands(unit string, a Action) []Command {
	reload := Command{Argv: []string{"systemctl", "--user", "daemon-reload"}}
	if a == Updated {
		// enable --now does not restart a running service onto the new unit.
		return []Command{reload,
			{Argv: []string{"systemctl", "--user", "enable", unit}},
			{Argv: []string{"systemctl", "--user", "restart", unit}}}
	}
	return []Command{reload, {Argv: []string{"systemctl", "--user", "enable", "--now", unit}}}
}

func stopCommands(k Kind, label string, uid int) []Command {
	if k == Launchd {
		return []Command{{Argv: []string{"launchctl", "bootout", "gui/" + strconv.Itoa(uid) + "/" + label}, MayFail: true}}
	}
	return []Command{
		{Argv: []string{"systemctl", "--user", "stop", UnitName}, MayFail: true},
		{Argv: []string{"systemctl", "--user", "daemon-reload"}},
	}
}

// ShellJoin quotes argv for a POSIX shell, quoting only words that need it.
func ShellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
