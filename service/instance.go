package service

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// One memd per memory repo: besides the plain install (memd.service, dev.memd.agent: the
// default instance, unchanged), `memd service install --repo DIR` (or --config FILE) installs
// an instance for that repo. On systemd every instance runs from one template, memd@.service,
// as memd@<systemd-escape --path REPO>.service; its drop-in holds what differs per repo (the
// config file). On launchd each instance is its own agent, dev.memd.<name>.

// TemplateName is the systemd template unit every per-repo instance runs from.
const TemplateName = "memd@.service"

// DropInName is the per-instance drop-in that Install writes beside the template.
const DropInName = "memd-instance.conf"

// repoComment marks the repo an instance serves in its drop-in, for List.
const repoComment = "# memd-repo: "

// InstanceName is repo's instance name: systemd-escape --path rules (the path without its
// leading and trailing slashes, "/" as "-", every byte outside [A-Za-z0-9:_.] and a
// leading "." as \xNN), so %I in the template unescapes to the repo path without its leading "/".
func InstanceName(repo string) string {
	p := strings.Trim(filepath.Clean(repo), "/")
	if p == "" {
		return "-"
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '/':
			b.WriteByte('-')
		case c == '.' && i == 0:
			fmt.Fprintf(&b, `\x%02x`, c)
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == ':', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, `\x%02x`, c)
		}
	}
	return b.String()
}

// InstanceUnit is the systemd unit name of an instance: memd@<instance>.service.
func InstanceUnit(instance string) string { return "memd@" + instance + ".service" }

// InstanceLabel is the launchd label of an instance: dev.memd.<instance> with every byte a
// label cannot hold (the \ of an escape, ':') written as '_'.
func InstanceLabel(instance string) string {
	b := []byte(instance)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	l := "dev.memd." + strings.ReplaceAll(string(b), "--", "-_")
	if l == DefaultLabel { // a repo at /agent must not take the default's label
		l += "_"
	}
	return l
}

// instanceParams completes p for an instance: the label, and --repo always passed (the
// launchd agent names its repo on its command line, as the systemd template does).
func instanceParams(p Params) Params {
	p.Label = InstanceLabel(p.Instance)
	p.RepoFlag = p.Repo
	return p
}

// RenderSystemdTemplate renders memd@.service: the unit with the repo taken from the
// instance name (%I), so one file serves every repo.
func RenderSystemdTemplate(p Params) ([]byte, error) {
	p.Repo, p.ConfigFile, p.RepoFlag = "/", "", ""
	if err := p.check(true, false); err != nil {
		return nil, err
	}
	return renderUnit(unitData{
		Unit:           "memd@INSTANCE.service",
		Repo:           "/%I",
		ExecStart:      systemdQuote(p.Executable, true) + " run --repo /%I",
		ReadWritePaths: "-/%I",
		RemoveArgs:     " --repo REPO",
		PrivateTmp:     true,
		Template:       true,
	})
}

// RenderDropIn renders an instance's drop-in: its repo (a comment, for List), its config
// file as $MEMD_CONFIG (memd run reads it when no --config is given), and PrivateTmp off for
// a repo under /tmp.
func RenderDropIn(p Params) ([]byte, error) {
	if err := p.check(true, false); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s for %s. Do not edit: `memd service install` rewrites this file.\n", Marker, InstanceUnit(p.Instance))
	fmt.Fprintf(&b, "%s%s\n[Service]\n", repoComment, p.Repo)
	if p.ConfigFile != "" {
		fmt.Fprintf(&b, "Environment=%s\n", systemdQuote("MEMD_CONFIG="+p.ConfigFile, false))
	}
	if underTmp(p.Repo) {
		b.WriteString("# The repo lives under a temporary directory a private /tmp would hide.\nPrivateTmp=no\n")
	}
	return b.Bytes(), nil
}

// DropInPath is where an instance's drop-in lives.
func DropInPath(e Env, instance string) (string, error) {
	unit, err := UnitPath(Systemd, e, "")
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(unit), InstanceUnit(instance)+".d", DropInName), nil
}

// InstallInstance installs the instance p.Instance for p.Repo: on systemd the template (when
// it is not there or not current) and the instance's drop-in; on launchd the instance's
// plist. Like Install it is idempotent and replaces only files memd wrote.
func InstallInstance(k Kind, p Params, e Env, opt Options) (Result, error) {
	if p.Instance == "" {
		return Result{}, fmt.Errorf("%w: no instance name", ErrBadParams)
	}
	p = instanceParams(p)
	if k == Launchd {
		return Install(k, p, e, opt)
	}
	if p.Home == "" {
		p.Home = e.Home
	}
	tmplPath, err := templatePath(e)
	if err != nil {
		return Result{}, err
	}
	tmpl, err := RenderSystemdTemplate(p)
	if err != nil {
		return Result{}, err
	}
	dropPath, err := DropInPath(e, p.Instance)
	if err != nil {
		return Result{}, err
	}
	drop, err := RenderDropIn(p)
	if err != nil {
		return Result{}, err
	}
	res := Result{Kind: k, Path: dropPath}
	tmplAction, tmplBackup, err := place(tmplPath, tmpl, opt)
	if err != nil {
		return res, err
	}
	if res.Action, res.Backup, err = place(dropPath, drop, opt); err != nil {
		return res, err
	}
	if tmplAction != Unchanged {
		res.Also = append(res.Also, fmt.Sprintf("%s %s", tmplAction, tmplPath))
		if tmplBackup != "" {
			res.Also = append(res.Also, "kept the file that was there as "+tmplBackup)
		}
		if res.Action == Unchanged {
			res.Action = Updated // the instance runs from the new template after a restart
		}
	}
	res.Next = startUnitCommands(InstanceUnit(p.Instance), res.Action)
	return res, nil
}

// UninstallInstance removes one instance: its drop-in and enable links (systemd; the template
// goes with the last instance) or its plist (launchd). The other instances stay.
func UninstallInstance(k Kind, e Env, instance string, opt Options) (Result, error) {
	if k == Launchd {
		return Uninstall(k, e, InstanceLabel(instance), opt)
	}
	dropPath, err := DropInPath(e, instance)
	if err != nil {
		return Result{}, err
	}
	res := Result{Kind: k, Path: dropPath}
	if res.Action, res.Backup, err = removeOurs(dropPath, opt); err != nil {
		return res, err
	}
	_ = os.Remove(filepath.Dir(dropPath)) // only when empty: a user's own drop-ins stay
	tmplPath, err := templatePath(e)
	if err != nil {
		return res, err
	}
	links, err := removeWantsLinksNamed(filepath.Dir(tmplPath), InstanceUnit(instance), tmplPath)
	res.Removed = links
	if err != nil {
		return res, err
	}
	if rest, err := List(Systemd, e); err == nil && !hasInstances(rest) {
		if a, _, err := removeOurs(tmplPath, Options{}); err == nil && a == Removed {
			res.Removed = append(res.Removed, tmplPath)
		}
	}
	res.Next = []Command{
		{Argv: []string{"systemctl", "--user", "stop", InstanceUnit(instance)}, MayFail: true},
		{Argv: []string{"systemctl", "--user", "daemon-reload"}},
	}
	return res, nil
}

func hasInstances(list []Installed) bool {
	for _, i := range list {
		if i.Instance != "" {
			return true
		}
	}
	return false
}

func templatePath(e Env) (string, error) {
	unit, err := UnitPath(Systemd, e, "")
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(unit), TemplateName), nil
}

// Installed is one memd service found installed: the default (Instance "") or an instance.
type Installed struct {
	Kind     Kind
	Instance string // "" for the default memd.service / dev.memd.agent
	Unit     string // memd.service, memd@….service, or the launchd label
	Path     string // the file that installs it (unit, drop-in or plist)
	Repo     string // the repo it runs on; "" when the file does not say (a default run by config)
}

// List finds every memd service installed under e for k, the default first, then the
// instances by unit name.
func List(k Kind, e Env) ([]Installed, error) {
	if k == Launchd {
		return listLaunchd(e)
	}
	unit, err := UnitPath(Systemd, e, "")
	if err != nil {
		return nil, err
	}
	var out []Installed
	if data, state, err := inspect(unit); err == nil && state == fileOurs {
		out = append(out, Installed{Kind: Systemd, Unit: UnitName, Path: unit, Repo: unitRepo(data)})
	}
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(unit), "memd@*.service.d"))
	sort.Strings(dirs)
	for _, d := range dirs {
		p := filepath.Join(d, DropInName)
		data, state, err := inspect(p)
		if err != nil || state != fileOurs {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(d), ".d")
		inst := strings.TrimSuffix(strings.TrimPrefix(name, "memd@"), ".service")
		out = append(out, Installed{Kind: Systemd, Instance: inst, Unit: name, Path: p, Repo: commentRepo(data)})
	}
	return out, nil
}

func listLaunchd(e Env) ([]Installed, error) {
	def, err := UnitPath(Launchd, e, "")
	if err != nil {
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(filepath.Dir(def), "dev.memd.*.plist"))
	sort.Strings(paths)
	var out []Installed
	for _, p := range paths {
		data, state, err := inspect(p)
		if err != nil || state != fileOurs {
			continue
		}
		label := strings.TrimSuffix(filepath.Base(p), ".plist")
		in := Installed{Kind: Launchd, Unit: label, Path: p, Repo: plistRepo(data)}
		if label != DefaultLabel {
			in.Instance = strings.TrimPrefix(label, "dev.memd.") // InstanceLabel gives the label back
		}
		if label == DefaultLabel {
			out = append([]Installed{in}, out...)
		} else {
			out = append(out, in)
		}
	}
	return out, nil
}

// unitRepo reads the repo back from the plain unit's ReadWritePaths= line.
func unitRepo(unit []byte) string {
	for _, l := range strings.Split(string(unit), "\n") {
		v, ok := strings.CutPrefix(l, "ReadWritePaths=")
		if !ok {
			continue
		}
		if strings.HasPrefix(v, `"`) && strings.HasSuffix(v, `"`) && len(v) >= 2 {
			v = strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(v[1 : len(v)-1])
		}
		return strings.ReplaceAll(strings.TrimPrefix(v, "-"), "%%", "%")
	}
	return ""
}

func commentRepo(dropIn []byte) string {
	for _, l := range strings.Split(string(dropIn), "\n") {
		if v, ok := strings.CutPrefix(l, repoComment); ok {
			return v
		}
	}
	return ""
}

// plistRepo reads --repo from the plist's ProgramArguments.
func plistRepo(data []byte) string {
	dec := xml.NewDecoder(bytes.NewReader(data))
	var args []string
	inArgs, lastKey := false, ""
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "key" {
				var k string
				_ = dec.DecodeElement(&k, &t)
				lastKey = k
			} else if t.Name.Local == "array" && lastKey == "ProgramArguments" {
				inArgs = true
			} else if t.Name.Local == "string" && inArgs {
				var s string
				_ = dec.DecodeElement(&s, &t)
				args = append(args, s)
			}
		case xml.EndElement:
			if t.Name.Local == "array" {
				inArgs = false
			}
		}
	}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--repo" {
			return args[i+1]
		}
	}
	return ""
}

// place writes data at path unless it is there already: a file memd wrote is replaced, a
// foreign one only with opt.Force (kept as a backup).
func place(path string, data []byte, opt Options) (Action, string, error) {
	old, state, err := inspect(path)
	if err != nil {
		return "", "", err
	}
	var a Action
	backupPath := ""
	switch state {
	case fileMissing:
		a = Created
	case fileOurs:
		if bytes.Equal(old, data) {
			return Unchanged, "", nil
		}
		a = Updated
	case fileForeign:
		if !opt.Force {
			return "", "", fmt.Errorf("%s: %w; use --force to replace it (it is then kept as %s)", path, ErrForeign, backupName(path))
		}
		if backupPath, err = backup(path); err != nil {
			return "", "", err
		}
		a = Updated
	}
	return a, backupPath, writeAtomic(path, data)
}

// removeOurs removes the file at path if memd wrote it (a foreign one only with opt.Force,
// kept as a backup); nothing there is Absent.
func removeOurs(path string, opt Options) (Action, string, error) {
	_, state, err := inspect(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Absent, "", nil
		}
		return "", "", err
	}
	switch state {
	case fileMissing:
		return Absent, "", nil
	case fileOurs:
		if err := os.Remove(path); err != nil {
			return "", "", fmt.Errorf("remove %s: %w", path, err)
		}
		return Removed, "", nil
	}
	if !opt.Force {
		return "", "", fmt.Errorf("%s: %w; use --force to remove it (it is then kept as %s)", path, ErrForeign, backupName(path))
	}
	b, err := backup(path)
	return Removed, b, err
}
