package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/metrics/statusline"
)

// ActionMessage is the message of a commit a person asked for (resolve, restore):
//
//	memd: <subject>
//
//	Memd-Action: <action>
//	<Key>: <value>...
//	Memd-Host: <host>
//
// kv are further trailers as key, value pairs. Newlines in values are escaped: one trailer a
// line, as commitmsg.Trailers reads them.
func ActionMessage(action, subject, host string, kv ...string) string {
	one := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r", `\r`), "\n", `\n`) }
	var b strings.Builder
	fmt.Fprintf(&b, "memd: %s\n\n%s: %s\n", one(subject), TrailerAction, action)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s: %s\n", kv[i], one(kv[i+1]))
	}
	fmt.Fprintf(&b, "%s: %s\n", TrailerHost, one(host))
	return b.String()
}

// Resolved is what Resolve did: the commit, and the name the copy now has (keep both).
type Resolved struct {
	Commit memd.CommitResult
	Kept   string // keep both: the copy's new name; else ""
}

// Resolve ends conflict c in the work tree and commits it: ours writes the copy's content
// over the original, theirs drops the copy, both renames the copy to KeptName. The caller
// holds the writer lock (agent.Session.Resolve). A copy whose content changed since c was
// read (blob id differs) is refused rather than dropped: nothing a writer just wrote is lost.
func (r *Repo) Resolve(c statusline.Conflict, keep string) (Resolved, error) {
	var out Resolved
	t, err := safefs.Open(r.dir)
	if err != nil {
		return out, err
	}
	defer t.Close()
	if now, err := blobIDOf(r.dir, c.Copy); err != nil {
		return out, fmt.Errorf("resolve %s: %w", c.Copy, err)
	} else if c.Ours != "" && now != c.Ours {
		return out, fmt.Errorf("resolve %s: the copy changed since it was listed (%s, now %s); list again", c.Copy, shortID(c.Ours), shortID(now))
	}
	paths := []string{c.Path, c.Copy}
	switch keep {
	case KeepOurs:
		data, err := t.ReadFile(c.Copy)
		if err != nil {
			return out, fmt.Errorf("resolve %s: %w", c.Copy, err)
		}
		if err := t.WriteFileAtomic(c.Path, data, 0o644); err != nil {
			return out, fmt.Errorf("resolve %s: %w", c.Path, err)
		}
		if err := t.Remove(c.Copy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, fmt.Errorf("resolve %s: %w", c.Copy, err)
		}
	case KeepTheirs:
		if err := t.Remove(c.Copy); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, fmt.Errorf("resolve %s: %w", c.Copy, err)
		}
	case KeepBoth:
		out.Kept = KeptName(r.dir, c)
		if err := t.Rename(c.Copy, out.Kept); err != nil {
			return out, fmt.Errorf("resolve %s: %w", c.Copy, err)
		}
		paths = append(paths, out.Kept)
	default:
		return out, fmt.Errorf("resolve %s: %w (got %q)", c.Copy, ErrBadKeep, keep)
	}
	subject := fmt.Sprintf("resolve %s (keep %s)", c.Path, keep)
	kv := []string{TrailerKeep, keep, "Memd-Copy", c.Copy}
	if out.Kept != "" {
		subject = fmt.Sprintf("resolve %s (keep both: %s)", c.Path, out.Kept)
	}
	msg := ActionMessage("resolve", subject, r.opts.Hostname, kv...)
	out.Commit, err = r.commitAction(paths, msg)
	if err != nil {
		return out, fmt.Errorf("resolve %s: %w", c.Path, err)
	}
	return out, nil
}

// actionRetries bounds the retries of an action's commit when HEAD moved under it (a user's
// own `git commit`): the work tree already holds the action, only the commit is redone.
const actionRetries = 5

// commitAction commits paths with msg, again on the new HEAD when HEAD moved.
func (r *Repo) commitAction(paths []string, msg string) (memd.CommitResult, error) {
	var res memd.CommitResult
	var err error
	for range actionRetries {
		if res, err = r.CommitPathsMessage(paths, msg, memd.CommitChange); !errors.Is(err, memd.ErrHeadMoved) {
			break
		}
	}
	return res, err
}

func shortID(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}
