package gitattr

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ErrFilter is every failure of a filter driver: missing where required, exiting non-zero,
// or speaking the protocol wrong. The path is then held, never stored unfiltered.
var ErrFilter = errors.New("filter failed")

// FilterError names the driver and the path that failed, with the driver's own words.
type FilterError struct {
	Driver, Path, Op string
	Err              error
}

func (e *FilterError) Error() string {
	return fmt.Sprintf("%s filter %q on %s: %v", e.Op, e.Driver, e.Path, e.Err)
}

func (e *FilterError) Unwrap() []error { return []error{ErrFilter, e.Err} }

// Driver is one filter.<name> of git config.
type Driver struct {
	Name                   string
	Clean, Smudge, Process string
	Required               bool
}

// configured says whether git would run anything for op ("clean" or "smudge").
func (d *Driver) configured(op string) bool {
	if d.Process != "" {
		return true
	}
	if op == "clean" {
		return d.Clean != ""
	}
	return d.Smudge != ""
}

// commandTimeout bounds one clean/smudge command (gpg asking a pinentry must not hold
// the owner forever).
const commandTimeout = 2 * time.Minute

// runCommand runs a clean or smudge command as git does: `sh -c` with %f as the quoted
// path, in the work tree root, content on stdin, the result on stdout.
func runCommand(dir, cmd, rel string, in []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-c", expandPercentF(cmd, rel))
	c.Dir = dir
	c.Env = filterEnv()
	ownGroup(c)
	c.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	errBuf := &capped{max: 512}
	c.Stdout, c.Stderr = &out, errBuf
	wait, err := startOwn(c)
	if err == nil {
		err = wait()
	}
	if err != nil {
		if msg := strings.TrimSpace(errBuf.String()); msg != "" {
			return nil, fmt.Errorf("%w: %s", err, msg)
		}
		return nil, err
	}
	return out.Bytes(), nil
}

// expandPercentF is git's strbuf_expand of a filter command: %f the path, single-quoted
// for the shell; %% a percent.
func expandPercentF(cmd, rel string) string {
	var b strings.Builder
	for i := 0; i < len(cmd); i++ {
		if cmd[i] != '%' || i+1 >= len(cmd) {
			b.WriteByte(cmd[i])
			continue
		}
		switch cmd[i+1] {
		case 'f':
			b.WriteString(shellQuote(rel))
			i++
		case '%':
			b.WriteByte('%')
			i++
		default:
			b.WriteByte('%')
		}
	}
	return b.String()
}

// shellQuote is git's sq_quote_buf: 'a'\”b'.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// capped keeps the first max bytes written (a driver's stderr, for the error).
type capped struct {
	buf bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

func (c *capped) String() string { return c.buf.String() }
