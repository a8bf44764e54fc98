package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/agents/claudecode"
	"github.com/memd-dev/memd/internal/testutil"
)

// fakeMessages is a Messages API on loopback for the real Claude Code: a prompt
// "REMEMBER <slug>" is answered the way a model saves a memory, through Claude Code's own
// tools: Write <memory dir>/<slug>.md, then Read and Write MEMORY.md with one more index
// line (or Write it new). The memory dir is the one the system prompt names. Every request
// body is kept, so a test can see what a session was shown.
type fakeMessages struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string
}

var (
	memoryDirRE = regexp.MustCompile("memory at `([^`]+)`")
	rememberRE  = regexp.MustCompile(`REMEMBER ([a-z0-9-]+)`)
)

func newFakeMessages(t *testing.T) *fakeMessages {
	f := &fakeMessages{}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// requests are the bodies received so far whose memory dir is dir.
func (f *fakeMessages) requests(dir string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.reqs {
		if m := memoryDirRE.FindStringSubmatch(r); m != nil && filepath.Clean(m[1]) == filepath.Clean(dir) {
			out = append(out, r)
		}
	}
	return out
}

type apiRequest struct {
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

type toolUse struct {
	Type  string         `json:"type"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

func (f *fakeMessages) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"input_tokens":1}`))
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, string(body))
	f.mu.Unlock()
	var req apiRequest
	_ = json.Unmarshal(body, &req)
	dir := ""
	if m := memoryDirRE.FindSubmatch(req.System); m != nil {
		dir = string(m[1])
	}
	slug := ""
	if m := rememberRE.FindSubmatch(body); m != nil {
		slug = string(m[1])
	}
	w.Header().Set("Content-Type", "text/event-stream")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_1", "type": "message",
		"role": "assistant", "model": "claude-sonnet-4-5", "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1, "output_tokens": 1}}})
	if name, input := nextTool(req, dir, slug); name != "" {
		in, _ := json.Marshal(input)
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", time.Now().UnixNano()), "name": name, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 1}})
	}
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

func sse(w io.Writer, event string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
}

// nextTool decides the model's next step from the tools it already used in this turn.
func nextTool(req apiRequest, dir, slug string) (string, map[string]any) {
	if dir == "" || slug == "" {
		return "", nil
	}
	var last *toolUse
	for _, m := range req.Messages {
		if m.Role != "assistant" {
			continue
		}
		var blocks []toolUse
		if json.Unmarshal(m.Content, &blocks) == nil {
			for i := range blocks {
				if blocks[i].Type == "tool_use" {
					last = &blocks[i]
				}
			}
		}
	}
	file := filepath.Join(dir, slug+".md")
	index := filepath.Join(dir, "MEMORY.md")
	line := fmt.Sprintf("- [%s](%s.md) — the %s fact\n", slug, slug, slug)
	switch {
	case last == nil:
		return "Write", map[string]any{"file_path": file, "content": fmt.Sprintf(
			"---\nname: %s\ndescription: the %s fact\nmetadata:\n  type: project\n---\n\nThe %s fact.\n", slug, slug, slug)}
	case last.Name == "Write" && last.Input["file_path"] == file:
		if _, err := os.Stat(index); err == nil {
			return "Read", map[string]any{"file_path": index}
		}
		return "Write", map[string]any{"file_path": index, "content": line}
	case last.Name == "Read":
		cur, _ := os.ReadFile(index)
		s := string(cur)
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return "Write", map[string]any{"file_path": index, "content": s + line}
	}
	return "", nil
}

// claudeMachine is one HOME running `memd run` on a clone of the shared remote, with a
// checkout of the project and the real Claude Code.
type claudeMachine struct {
	*world
	claude  testutil.Claude
	project string
	d       *testutil.Daemon
}

func newClaudeMachine(t *testing.T, name, bare, projectRel, origin string, roots bool, claude testutil.Claude) *claudeMachine {
	t.Helper()
	home := t.TempDir()
	project := filepath.Join(home, filepath.FromSlash(projectRel))
	cfg := syncConfig + "agents:\n  claude_code:\n    memory: true\n"
	if roots {
		cfg += "    roots: [" + filepath.Dir(project) + "]\n"
	}
	w := &world{t: t, home: home, repo: filepath.Join(home, name), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n[user]\n\tname = dev\n\temail = dev@x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = testutil.IsolatedEnv(home, gitconfig)
	if out, code := w.memd("init", "--config", w.config, w.repo, "--remote", bare); code != 0 {
		t.Fatalf("memd init %s: exit %d\n%s", name, code, out)
	}
	g := testutil.Git{Env: w.env}
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"remote", "add", "origin", origin}} {
		if _, err := g.Run(project, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(project, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "widget"}} {
		if _, err := g.Run(project, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	c := claude
	c.Home, c.ConfigDir = home, filepath.Join(home, ".claude")
	return &claudeMachine{world: w, claude: c, project: project}
}

// memoryDir is Claude Code's memory dir for the project on this machine.
func (m *claudeMachine) memoryDir() string {
	d, ok := claudecode.MemoryDir(m.claude.ConfigDir, m.project)
	if !ok {
		m.t.Fatalf("no memory dir for %s", m.project)
	}
	return d
}

// session runs one `claude -p prompt` in the project against the fake API.
func (m *claudeMachine) session(api *fakeMessages, prompt string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), claudeTimeout)
	defer cancel()
	env := append(append([]string(nil), m.env...), "ANTHROPIC_BASE_URL="+api.srv.URL, "ANTHROPIC_API_KEY=sk-ant-test")
	// CLAUDE_CONFIG_DIR is the default, ~/.claude, as memd finds it without being told.
	cmd := m.claude.Command(ctx, m.project, env, "-p", prompt)
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("claude -p %q in %s: %v\n%s", prompt, m.project, err, out)
	}
}

func (m *claudeMachine) status() string {
	m.t.Helper()
	out, err := exec.Command("git", "-C", m.project, "status", "--porcelain", "--ignored").Output()
	if err != nil {
		m.t.Fatal(err)
	}
	return string(out)
}

// hasMemories: Claude Code's memory dir holds every slug's file and index line.
func (m *claudeMachine) hasMemories(slugs ...string) bool {
	idx, err := os.ReadFile(filepath.Join(m.memoryDir(), "MEMORY.md"))
	if err != nil {
		return false
	}
	for _, s := range slugs {
		if _, err := os.Stat(filepath.Join(m.memoryDir(), s+".md")); err != nil || !strings.Contains(string(idx), "("+s+".md)") {
			return false
		}
	}
	return true
}

func (m *claudeMachine) waitMemories(what string, slugs ...string) {
	m.t.Helper()
	testutil.WaitFor(m.t, what, 60*time.Second, func() bool { return m.hasMemories(slugs...) }, func() string {
		b, _ := os.ReadFile(filepath.Join(m.memoryDir(), "MEMORY.md"))
		return fmt.Sprintf("\n%s MEMORY.md:\n%s%s", m.memoryDir(), b, m.d.Describe())
	})
}

// lastShown: the newest request of a session of this machine showed every slug's index line.
func (m *claudeMachine) shown(api *fakeMessages, slugs ...string) error {
	reqs := api.requests(m.memoryDir())
	if len(reqs) == 0 {
		return fmt.Errorf("no request from %s", m.project)
	}
	last := reqs[len(reqs)-1]
	for _, s := range slugs {
		if !strings.Contains(last, "("+s+".md)") {
			return fmt.Errorf("%s's session was not shown %s's index line", m.project, s)
		}
	}
	return nil
}

// TestClaudeCodeMemoryFollowsTheProject: one project at two paths on two machines (the ssh
// and the https spelling of its origin) shares one Claude Code memory through the memory
// repo, written by the real Claude Code's own Write: A→B, B→A, adds on both at once, a
// third machine that starts later gets every memory on its first session (roots). No
// session id or transcript line reaches the remote; the projects' `git status` is unchanged.
func TestClaudeCodeMemoryFollowsTheProject(t *testing.T) {
	t.Parallel()
	claude := testutil.InstallClaude(t)
	api := newFakeMessages(t)
	tmp := t.TempDir()
	bare := filepath.Join(tmp, "remote.git")
	seedRemote(t, tmp, bare)

	a := newClaudeMachine(t, "vm-a", bare, "src/widget", "git@github.com:acme/widget.git", false, claude)
	b := newClaudeMachine(t, "vm-b", bare, "work/clients/widget", "https://github.com/acme/widget.git", false, claude)
	statusA, statusB := a.status(), b.status()
	a.d, b.d = a.start(), b.start()

	// A→B: A's session saves a memory; B's first session makes the project known to memd
	// there, its second is shown A's memory.
	a.session(api, "REMEMBER a-one")
	waitRemote(t, bare, "agents/claude-code/github.com/acme/widget/a-one.md", a.d, b.d)
	b.session(api, "hello")
	b.waitMemories("A's memory in B's Claude Code dir", "a-one")
	b.session(api, "REMEMBER b-one")
	if err := b.shown(api, "a-one"); err != nil {
		t.Fatal(err)
	}
	// B→A.
	a.waitMemories("B's memory in A's Claude Code dir", "a-one", "b-one")
	a.session(api, "hello")
	if err := a.shown(api, "a-one", "b-one"); err != nil {
		t.Fatal(err)
	}

	// Adds on both at once: both files and both index lines everywhere.
	var wg sync.WaitGroup
	for _, x := range []struct {
		m    *claudeMachine
		slug string
	}{{a, "a-two"}, {b, "b-two"}} {
		wg.Add(1)
		go func() { defer wg.Done(); x.m.session(api, "REMEMBER "+x.slug) }()
	}
	wg.Wait()
	all := []string{"a-one", "b-one", "a-two", "b-two"}
	a.waitMemories("every memory on A", all...)
	b.waitMemories("every memory on B", all...)

	// A third machine, later, names its folder of checkouts in roots: its first session sees all.
	c := newClaudeMachine(t, "vm-c", bare, "code/widget", "https://GitHub.com/acme/widget", true, claude)
	statusC := c.status()
	c.d = c.start()
	c.waitMemories("every memory on C before its first session", all...)
	c.session(api, "hello")
	if err := c.shown(api, all...); err != nil {
		t.Fatal(err)
	}

	for _, x := range []struct {
		m      *claudeMachine
		before string
	}{{a, statusA}, {b, statusB}, {c, statusC}} {
		if got := x.m.status(); got != x.before {
			t.Errorf("git status of %s changed:\n%s\nwas\n%s", x.m.project, got, x.before)
		}
	}
	checkNoSessionInRemote(t, bare, a, b, c)
	for _, m := range []*claudeMachine{a, b, c} {
		m.checkStatus()
	}
	for _, m := range []*claudeMachine{a, b, c} {
		if code := m.d.Stop(); code != 0 {
			t.Errorf("%s: SIGTERM: exit %d", m.repo, code)
		}
	}
}

// seedRemote makes the shared bare remote with one commit.
func seedRemote(t *testing.T, tmp, bare string) {
	t.Helper()
	g := testutil.Git{Env: testutil.IsolatedEnv(tmp, filepath.Join(tmp, "gitconfig"))}
	seed := filepath.Join(tmp, "seed")
	id := []string{"GIT_AUTHOR_NAME=seed", "GIT_AUTHOR_EMAIL=seed@x", "GIT_COMMITTER_NAME=seed", "GIT_COMMITTER_EMAIL=seed@x"}
	for _, step := range []struct {
		dir  string
		args []string
	}{{tmp, []string{"init", "-q", "--bare", "-b", "main", bare}}, {bare, []string{"config", "gc.autoDetach", "false"}},
		{tmp, []string{"init", "-q", "-b", "main", seed}}} {
		if _, err := g.Run(step.dir, id, step.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(seed, "README.md"), []byte("memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "seed"}, {"push", "-q", bare, "main"}} {
		if _, err := g.Run(seed, id, args...); err != nil {
			t.Fatal(err)
		}
	}
}

func waitRemote(t *testing.T, bare, rel string, ds ...*testutil.Daemon) {
	t.Helper()
	testutil.WaitFor(t, rel+" on the remote", 60*time.Second, func() bool {
		return exec.Command("git", "-C", bare, "cat-file", "-e", "main:"+rel).Run() == nil
	}, func() string {
		var b strings.Builder
		for _, d := range ds {
			b.WriteString(d.Describe())
		}
		return b.String()
	})
}

// checkNoSessionInRemote: no object of the remote holds a session id of any machine's
// transcripts, or a transcript line.
func checkNoSessionInRemote(t *testing.T, bare string, ms ...*claudeMachine) {
	t.Helper()
	out, err := exec.Command("git", "-C", bare, "cat-file", "--batch-all-objects", "--batch").Output()
	if err != nil {
		t.Fatal(err)
	}
	objects := string(out)
	ids := 0
	for _, m := range ms {
		ts, _ := filepath.Glob(filepath.Join(m.claude.ConfigDir, "projects", "*", "*.jsonl"))
		for _, tr := range ts {
			id := strings.TrimSuffix(filepath.Base(tr), ".jsonl")
			ids++
			if strings.Contains(objects, id) {
				t.Errorf("session id %s (%s) is in an object of the remote", id, tr)
			}
		}
	}
	if ids < 6 {
		t.Fatalf("only %d transcripts found: the check would prove nothing", ids)
	}
	for _, s := range []string{"originSessionId", `"sessionId"`, `"parentUuid"`} {
		if strings.Contains(objects, s) {
			t.Errorf("%s is in an object of the remote", s)
		}
	}
}

// checkStatus: `memd status --format json` counts the project, synced under its id at this
// machine's path, with the time of the last copy.
func (m *claudeMachine) checkStatus() {
	m.t.Helper()
	out, code := m.memd("status", "--config", m.config, "--repo", m.repo, "--format", "json")
	var doc struct {
		ClaudeCode *struct {
			Projects int `json:"projects"`
			Synced   []struct {
				Path, ID    string
				LastChange  *time.Time `json:"last_change"`
				LastMachine string     `json:"last_machine"`
			} `json:"synced"`
		} `json:"claude_code"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.ClaudeCode == nil {
		m.t.Fatalf("memd status --format json: exit %d, no claude_code part:\n%s", code, out)
	}
	cc := doc.ClaudeCode
	// Every machine here is this host: memd names the machine from the commit's Memd-Host
	// (a change that came in) or itself (one made here).
	host, _ := os.Hostname()
	if cc.Projects != 1 || len(cc.Synced) != 1 || cc.Synced[0].Path != m.project || cc.Synced[0].ID != "github.com/acme/widget" ||
		cc.Synced[0].LastChange == nil || cc.Synced[0].LastMachine != host {
		m.t.Errorf("%s: claude_code = %+v", m.repo, *cc)
	}
}
