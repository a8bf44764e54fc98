package statusline

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/drain"
)

// Show is all `memd status` does: read the repo's document (never git, never the daemon) and
// render it. No document renders "not started" with a nil error. An unreadable document
// renders an error line and also returns the error, for stderr; the caller still exits 0 so
// a prompt or bar keeps drawing.
func Show(repo, format string, now time.Time, pidAlive func(int) bool) (string, error) {
	if !IsFormat(format) {
		return Render(nil, format, now, pidAlive) // the ErrUnknownFormat error
	}
	d, err := ReadAt(repo)
	switch {
	case err == nil:
		return Render(d, format, now, pidAlive)
	case errors.Is(err, ErrNoDocument):
		return Render(nil, format, now, pidAlive)
	}
	bad := standIn(nil, "", "")
	bad.State = StateError
	bad.Repo = repo
	bad.Error = clean(err.Error())
	bad.Detail = bad.Error
	parts := []Part{{Text: "memd: "}, {Text: "error:", Kind: KindError}, {Text: " unreadable " + FileName}}
	bad.Summary = Summary{Text: joinText(parts), Parts: parts}
	bad.Sections[0].Lines = []Line{{Text: joinText(parts[1:]), Parts: parts[1:]}, {Text: bad.Detail, Kind: KindDim}}
	bad.UpdatedAt = now.UTC().Truncate(time.Second)
	alive := func(int) bool { return true }
	out, rerr := Render(bad, format, now, alive)
	if rerr != nil {
		return "", rerr
	}
	return out, err
}

// ClaudeInputWait bounds how long `memd status --format claude` reads the JSON piped in.
const ClaudeInputWait = 200 * time.Millisecond

// Command is `memd status` once the repo, format and clock are known, shared by the command
// and its fast path so both print the same bytes: drain stdin for claude, render, print, and
// report an unreadable document on stderr. It returns the exit code (0, or 2 for an unknown
// format).
func Command(repo, format string, now time.Time, stdin io.Reader, stdout, stderr io.Writer) int {
	if !IsFormat(format) {
		fmt.Fprintf(stderr, "memd: status: unknown --format %q (known: %s)\n", format, strings.Join(Formats, ", "))
		return 2
	}
	if format == "claude" {
		// Claude Code pipes its session JSON in; read and ignore it, never wait on a terminal.
		drain.Input(stdin, 1<<20, ClaudeInputWait)
	}
	out, err := Show(repo, format, now, nil)
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	fmt.Fprint(stdout, out)
	if err != nil {
		fmt.Fprintf(stderr, "memd: status: %v\n", err)
	}
	return 0
}
