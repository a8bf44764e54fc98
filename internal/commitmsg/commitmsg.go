// Package commitmsg reads what memd writes at the foot of its commit messages: the one
// trailer parser, for sync/gitrepo (memd log's host and action) and sleep (resuming from
// Memd-Run and Memd-Phase), which must not need each other to read a message.
package commitmsg

import "strings"

// Trailers parses the trailer block of a commit message: the last
// paragraph, when every line in it is "Key: value". Later keys win.
func Trailers(message string) map[string]string {
	msg := strings.TrimRight(message, "\n")
	i := strings.LastIndex(msg, "\n\n")
	if i < 0 {
		return nil // a subject alone has no trailers
	}
	block := msg[i+2:]
	out := make(map[string]string)
	for _, line := range strings.Split(block, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}
