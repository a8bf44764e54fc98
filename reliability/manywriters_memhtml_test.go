package reliability

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// Clone B's agent in the many-writers run: the real memhtml CLI (testutil.InstallMemhtml)
// beside `memd run`. `memhtml write` (which commits on its own, a git of its own beside
// memd) every 1–3 s, and about every mhSleepEvery a `memhtml sleep run` on its review
// branch then `memhtml sleep merge` of that run. B's agent does one thing at a time: the
// plain file writer pauses while a sleep waits for a clean tree, runs and merges
// (manyWriters.bMu).

// mhSleepEvery is how often clone B's agent sleeps.
const mhSleepEvery = 40 * time.Second

// mhStats is what memhtml on clone B did.
type mhStats struct {
	writes, writeFails    int
	runs, runsRefused     int
	merges, mergesRefused int
	titles                []string // every title memhtml wrote (found on main at the end)
	refusals              []string // why a run or merge was refused
}

// memhtml runs the CLI in dir as an agent (its own git identity) and returns the envelope's
// data, or the refusal (code and error, or stderr's tail).
func (m *manyWriters) memhtml(dir string, args ...string) (json.RawMessage, string) {
	cmd := m.mh.Command(dir, args...)
	cmd.Env = append(cmd.Env, "GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.com",
		"GIT_CONFIG_GLOBAL="+filepath.Join(m.w.home, "gitconfig"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error string          `json:"error"`
		Code  string          `json:"code"`
	}
	_ = json.Unmarshal(out, &env)
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			m.w.t.Fatalf("memhtml %s: %v", strings.Join(args, " "), err)
		}
		why := strings.TrimSpace(env.Code + " " + env.Error)
		if why == "" {
			why = tail(stderr.String(), 300)
		}
		return nil, fmt.Sprintf("memhtml %s: %s", args[0]+" "+argAt(args, 1), why)
	}
	return env.Data, ""
}

func argAt(a []string, i int) string {
	if i < len(a) {
		return a[i]
	}
	return ""
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// memhtmlAgent is clone B's memhtml: writes, and a sleep run then merge every mhSleepEvery.
func (m *manyWriters) memhtmlAgent(dir string, rng *rand.Rand, stop time.Time) {
	nextSleep := time.Now().Add(mhSleepEvery / 2)
	for i := 0; time.Now().Before(stop); i++ {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(2*time.Second))))
		title := fmt.Sprintf("Writer B note %04d", i)
		day := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, i%300).Format("2006-01-02")
		_, why := m.memhtml(dir, "write", "--type", "episodic", "--title", title, "--entity", "person:Writer B",
			"--article-html", fmt.Sprintf(`<p><mark>%s was written.</mark> On <time datetime="%s">%s</time>.</p>`, title, day, day))
		m.mu.Lock()
		if why == "" {
			m.mhs.writes++
			m.mhs.titles = append(m.mhs.titles, title)
		} else {
			m.mhs.writeFails++
			m.mhs.refusals = append(m.mhs.refusals, why)
		}
		m.mu.Unlock()
		if time.Now().After(nextSleep) {
			m.memhtmlSleep(dir, i)
			nextSleep = time.Now().Add(mhSleepEvery)
		}
	}
}

// memhtmlSleep waits (bounded) for memd to have committed B's tree, as memhtml's preflight
// asks, then runs memhtml's sleep for a date of its own and merges it. A refused run or merge
// leaves B on main (the agent's cleanup), and is counted with its reason.
func (m *manyWriters) memhtmlSleep(dir string, k int) {
	m.bMu.Lock()
	defer m.bMu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if out, err := m.w.gitRun(dir, nil, "status", "--porcelain"); err == nil && strings.TrimSpace(out) == "" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	date := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, k).Format("2006-01-02")
	refuse := func(why string, merge bool) {
		m.mu.Lock()
		if merge {
			m.mhs.mergesRefused++
		} else {
			m.mhs.runsRefused++
		}
		m.mhs.refusals = append(m.mhs.refusals, why)
		m.mu.Unlock()
		if cur, _ := m.w.gitRun(dir, nil, "rev-parse", "--abbrev-ref", "HEAD"); strings.TrimSpace(cur) != "main" {
			_, _ = m.w.gitRun(dir, nil, "checkout", "-q", "-f", "main")
		}
	}
	data, why := m.memhtml(dir, "sleep", "run", "--date", date)
	m.mu.Lock()
	m.mhs.runs++
	m.mu.Unlock()
	if why != "" {
		refuse(why, false)
		return
	}
	var run struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal(data, &run); err != nil || run.RunID == "" {
		refuse(fmt.Sprintf("memhtml sleep run: no run id in %s", tail(string(data), 200)), false)
		return
	}
	if _, why := m.memhtml(dir, "sleep", "merge", run.RunID); why != "" {
		refuse(why, true)
		return
	}
	m.mu.Lock()
	m.mhs.merges++
	m.mu.Unlock()
}

// verifyMemhtml: every title memhtml wrote is in a file on the remote's main; the run made
// at least one sleep merge and none was refused.
func (m *manyWriters) verifyMemhtml() (found int, problems []string) {
	w := m.w
	for _, title := range m.mhs.titles {
		if out, _ := w.gitRun(w.bare, nil, "grep", "-l", "-F", "-e", title, "refs/heads/main"); strings.TrimSpace(out) != "" {
			found++
			continue
		}
		problems = append(problems, "lost: memhtml's write "+title+" is in no file on the remote's main")
	}
	if m.mhs.merges == 0 {
		problems = append(problems, fmt.Sprintf("memhtml: no sleep merge accepted (%d runs, %d refused): %q", m.mhs.runs, m.mhs.runsRefused, m.mhs.refusals))
	}
	if m.mhs.mergesRefused > 0 {
		problems = append(problems, fmt.Sprintf("memhtml: %d sleep merges refused: %q", m.mhs.mergesRefused, m.mhs.refusals))
	}
	return found, problems
}

// installMemhtml is testutil.InstallMemhtml (skips loudly, or fails under CI, without npm).
func installMemhtml(m *manyWriters) { m.mh = testutil.InstallMemhtml(m.w.t) }
