package secrets

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// HistoryFinding is a secret in a commit of the repo's history: the commit that added it,
// the path, the rule and the line (in that commit's version of the file). Never the secret.
type HistoryFinding struct {
	Commit string `json:"commit"`
	Path   string `json:"path"`
	Rule   string `json:"rule"`
	Line   int    `json:"line"`
}

// ScanHistory scans what every commit of dir's history added, as `gitleaks git` does: the
// added lines of `git log -p -U0 --full-history --all`, hunk by hunk, with the repo's
// .gitleaksignore (global and commit fingerprints) and inline gitleaks:allow applied.
func ScanHistory(ctx context.Context, dir string, rs *Rules) ([]HistoryFinding, error) {
	return ScanHistoryProgress(ctx, dir, rs, nil)
}

// progressEvery is how many commits go by between two calls of a scan's progress.
const progressEvery = 1000

// ScanHistoryProgress is ScanHistory calling progress (when set) with the commits scanned
// so far, every progressEvery commits: `memd doctor --secrets` shows it on a terminal.
func ScanHistoryProgress(ctx context.Context, dir string, rs *Rules, progress func(commits int)) ([]HistoryFinding, error) {
	ignore, err := ReadIgnore(filepath.Join(dir, IgnoreFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", IgnoreFile, err)
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "-c", "core.quotePath=false", "log", "-p", "-U0",
		"--full-history", "--all", "--diff-filter=tuxdb", "--no-color", "--no-ext-diff", "--no-textconv", "--format=%x00%H")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("git log in %s: %w", dir, err)
	}
	found, perr := parseLog(out, rs, ignore, progress)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("git log in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	return found, perr
}

// logHunk is the added lines of one hunk of one file in one commit.
type logHunk struct {
	commit, path string
	start        int // the new side's first line
	added        strings.Builder
}

func parseLog(r io.Reader, rs *Rules, ignore map[string]bool, progress func(int)) ([]HistoryFinding, error) {
	var found []HistoryFinding
	commits := 0
	var commit, path string
	var h *logHunk
	flush := func() {
		if h == nil || h.added.Len() == 0 || h.path == "" {
			h = nil
			return
		}
		for _, f := range rs.Scan(h.path, h.added.String(), h.commit) {
			line := f.StartLine
			if line > 0 {
				line = h.start + line - 1
			}
			if ignore[fmt.Sprintf("%s:%s:%d", h.path, f.RuleID, line)] || ignore[fmt.Sprintf("%s:%s:%s:%d", h.commit, h.path, f.RuleID, line)] {
				continue
			}
			found = append(found, HistoryFinding{Commit: h.commit, Path: h.path, Rule: f.RuleID, Line: line})
		}
		h = nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "\x00"):
			flush()
			commit, path = l[1:], ""
			if commits++; progress != nil && commits%progressEvery == 0 {
				progress(commits)
			}
		case h != nil && strings.HasPrefix(l, "+"):
			h.added.WriteString(l[1:])
			h.added.WriteByte('\n')
		case h != nil && (strings.HasPrefix(l, "-") || strings.HasPrefix(l, `\`)):
			// a removed line, or "\ No newline at end of file"
		case strings.HasPrefix(l, "diff --git "):
			flush()
			path = ""
		case strings.HasPrefix(l, "+++ "):
			flush()
			path = diffPath(l[4:])
		case strings.HasPrefix(l, "@@ "):
			flush()
			h = &logHunk{commit: commit, path: path, start: hunkStart(l)}
		default:
			flush()
		}
	}
	flush()
	return found, sc.Err()
}

// diffPath is the path of a "+++ b/<path>" line ("" for /dev/null), unquoted.
func diffPath(s string) string {
	if s == "/dev/null" {
		return ""
	}
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			s = u
		}
	}
	return strings.TrimPrefix(s, "b/")
}

// hunkStart is the new side's first line of "@@ -a,b +c,d @@".
func hunkStart(l string) int {
	i := strings.Index(l, " +")
	if i < 0 {
		return 1
	}
	s := l[i+2:]
	if j := strings.IndexAny(s, ", "); j >= 0 {
		s = s[:j]
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1
	}
	return n
}
