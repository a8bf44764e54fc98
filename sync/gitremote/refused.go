package gitremote

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// ErrPushRefused says the remote answered a push and refused it for a reason of its own: a
// pre-receive hook, push protection (GitHub's "GH013: Repository rule violations found"), a
// protected branch, a remote that cannot unpack. Not an outage (never offline) and not a
// race (fetching again does not help): state error with the remote's message, retried no
// faster than pull_interval; local commits stay and go on.
var ErrPushRefused = errors.New("push refused by the remote")

// maxRemoteMessage caps what of a remote's own words reaches an error, a log or the status.
const maxRemoteMessage = 600

// Refusal is a push's report-status verdict (`ng <ref> <reason>` or an unpack error) with
// what the remote said meanwhile on its progress channel (a hook's stderr, the lines git
// prints as "remote: ..."). sync builds it from the push; Classify sorts it into
// ErrPushRejected (the branch moved) or ErrPushRefused.
type Refusal struct {
	Status string // go-git's text of the verdict
	Remote string // the remote's messages, as sent
}

func (e *Refusal) Error() string {
	msg := remoteLines(e.Remote)
	if msg == "" {
		return e.Status
	}
	return e.Status + "; remote: " + msg
}

// IsReportStatus reports whether err is go-git's text of a report-status refusal (what its
// PushContext returns for `ng` or an unpack error).
func IsReportStatus(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "command error on ") || strings.HasPrefix(s, "unpack error: ")
}

// remoteLines joins the remote's non-empty lines with " | ", drops go-git's and git's
// progress chatter (counting and resolving objects), and caps the result at a rune
// boundary.
func remoteLines(s string) string {
	var keep []string
	for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "remote:"))
		if l == "" || isProgress(l) {
			continue
		}
		keep = append(keep, l)
	}
	out := strings.Join(keep, " | ")
	if len(out) <= maxRemoteMessage {
		return out
	}
	cut := maxRemoteMessage
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return out[:cut] + " …"
}

func isProgress(l string) bool {
	for _, p := range []string{"Resolving deltas", "Counting objects", "Compressing objects", "Writing objects", "Total "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}
