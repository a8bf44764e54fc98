package sleep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/procgroup"
)

// MaxSummaryBytes caps what a summarizer may print; more is a failure (the process is
// killed), so a runaway command cannot fill memory.
const MaxSummaryBytes = 64 << 10

// ErrSummaryTooLong is returned when the summarizer prints more than MaxSummaryBytes.
var ErrSummaryTooLong = errors.New("summarizer output over 64 KiB")

// summaryInput is the arc JSON the summarizer reads on stdin.
type summaryInput struct {
	Entity   string           `json:"entity"`
	Year     int              `json:"year"`
	Path     string           `json:"path"`
	Episodes []summaryEpisode `json:"episodes"`
}

type summaryEpisode struct {
	Path  string `json:"path"`
	Date  string `json:"date"`
	Title string `json:"title"`
	Gist  string `json:"gist"`
}

// Summarize runs argv (no shell) with the arc as JSON on stdin and returns its stdout as
// plain text (RenderArc escapes it). The command runs in its own process group, and the
// whole group is killed at the timeout or when the output passes 64 KiB, so a command that
// forks a hanging child cannot hold sleep up.
//
// env is its whole environment (procgroup.ScrubEnv: the hooks' rule, docs/ARCHITECTURE.md §11; nil is
// the rule without hooks.env), so the push token never reaches it.
func Summarize(ctx context.Context, argv []string, timeout time.Duration, env []string, a memfile.Arc, arcPath string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("no summarizer command")
	}
	in := summaryInput{Entity: a.Entity, Year: a.Year, Path: arcPath}
	for _, e := range a.Episodes {
		in.Episodes = append(in.Episodes, summaryEpisode{Path: e.Path, Date: e.Date.Format("2006-01-02"), Title: e.Title, Gist: e.Gist})
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("summarizer input: %w", err)
	}
	if timeout <= 0 {
		timeout = 120 * time.Second
	}
	if env == nil {
		// Never nil to exec, which would hand on memd's own environment: the base rule.
		env = procgroup.ScrubEnv(os.Environ(), nil, nil)
	}
	run := procgroup.Run(ctx, argv, procgroup.Options{Env: env, Stdin: bytes.NewReader(stdin), Timeout: timeout,
		MaxOutput: MaxSummaryBytes, StderrKeep: 4096})
	switch {
	case errors.Is(run.Err, procgroup.ErrOutputTooLarge):
		return "", fmt.Errorf("summarizer %s: %w", argv[0], ErrSummaryTooLong)
	case errors.Is(run.Err, procgroup.ErrTimeout):
		return "", fmt.Errorf("summarizer %s: timed out after %s", argv[0], timeout)
	case run.Err != nil:
		return "", fmt.Errorf("summarizer %s: %w (stderr: %s)", argv[0], run.Err, strings.TrimSpace(string(run.Stderr)))
	}
	text := strings.TrimSpace(string(run.Output))
	if !utf8.ValidString(text) {
		return "", fmt.Errorf("summarizer %s: output is not UTF-8", argv[0])
	}
	return text, nil
}

// summarizerEnv is the summarizer's environment: the hooks' rule (procgroup.BaseEnv and the
// names in hooks.env, one list of what the user lets through to the commands memd runs;
// never sync.token_env).
func summarizerEnv(cfg memd.Config) []string {
	return procgroup.ScrubEnv(os.Environ(), cfg.Hooks.Env, []string{cfg.Sync.TokenEnv})
}
