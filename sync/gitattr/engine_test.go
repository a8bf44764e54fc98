package gitattr

import (
	"crypto/sha1"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// repo is a fresh git repo whose engine reads its config the way gitrepo does.
func repo(t *testing.T, attrs string, config ...string) (dir string, e *Engine) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no user attributes file from the machine
	dir = t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	for i := 0; i+1 < len(config); i += 2 {
		testutil.RunGit(t, dir, "config", config[i], config[i+1])
	}
	if attrs != "" {
		testutil.WriteFile(t, dir, ".gitattributes", attrs)
	}
	e = New(dir, filepath.Join(dir, ".git"), configList(t, dir))
	t.Cleanup(e.Close)
	return dir, e
}

func configList(t *testing.T, dir string) [][2]string {
	out := testutil.RunGit(t, dir, "config", "-z", "--list")
	var kv [][2]string
	for _, rec := range strings.Split(out, "\x00") {
		if k, v, ok := strings.Cut(rec, "\n"); ok {
			kv = append(kv, [2]string{k, v})
		}
	}
	return kv
}

func blobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// gitHash is `git hash-object --path rel` of content: what `git add` would store.
func gitHash(t *testing.T, dir, rel string, content []byte) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--path", rel, "--stdin")
	cmd.Dir, cmd.Env = dir, testutil.GitEnv()
	cmd.Stdin = strings.NewReader(string(content))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git hash-object --path %s: %v", rel, err)
	}
	return strings.TrimSpace(string(out))
}

// TestCleanAsGitAdd: for each attribute/config setup, what Clean stores is what git's
// hash-object --path stores, byte for byte (by blob id).
func TestCleanAsGitAdd(t *testing.T) {
	contents := [][]byte{
		[]byte("a\r\nb\r\n"), []byte("a\nb\r\nc\n"), []byte("lone\rcr\r\n"), []byte("bin\x00\r\n"),
		[]byte(""), []byte("plain\n"), []byte("x\r\n\x1a"),
	}
	paths := []string{"a.txt", "sub/b.html", "deep/er/c.md", "img.png", "notes/x.bin", "t.crlf"}
	cases := []struct {
		name, attrs string
		config      []string
	}{
		{"none", "", nil},
		{"text", "*.txt text\n*.md text\n", nil},
		{"eol-lf", "*.html text eol=lf\n", nil},
		{"eol-crlf", "* eol=crlf\n*.png binary\n", nil},
		{"auto", "* text=auto\n", nil},
		{"auto-eol", "* text=auto eol=lf\n", nil},
		{"autocrlf-true", "", []string{"core.autocrlf", "true"}},
		{"autocrlf-input", "*.png -text\n", []string{"core.autocrlf", "input"}},
		{"legacy-crlf", "*.txt crlf\n*.md -crlf\n*.crlf crlf=input\n", nil},
		{"doublestar", "deep/**/*.md text\n/sub/*.html text\n**/x.bin text\n", nil},
		{"macro", "[attr]mytext text eol=lf\n*.txt mytext\n*.html binary\n*.md text\n*.md -text\n", nil},
		{"unspecified", "* text\n*.txt !text\n", []string{"core.autocrlf", "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, e := repo(t, tc.attrs, tc.config...)
			for _, p := range paths {
				c := e.Conv(p)
				for _, in := range contents {
					got, err := c.Clean(in, nil)
					if err != nil {
						t.Fatal(err)
					}
					if want := gitHash(t, dir, p, in); blobID(got) != want {
						t.Errorf("%s %q: memd stores %q (%s), git %s", p, in, got, blobID(got), want)
					}
				}
			}
		})
	}
}

// TestSmudgeAsGitCheckout: what Smudge writes is what `git checkout` writes.
func TestSmudgeAsGitCheckout(t *testing.T) {
	dir, e := repo(t, "*.txt text eol=crlf\n*.md text\n*.bin -text\nsub/** text=auto\n", "core.autocrlf", "true",
		"filter.up.smudge", "tr a-z A-Z", "filter.up.clean", "tr A-Z a-z")
	testutil.WriteFile(t, dir, "f.up", "")
	testutil.WriteFile(t, dir, ".gitattributes", "*.txt text eol=crlf\n*.md text\n*.bin -text\nsub/** text=auto\n*.up filter=up\n")
	files := map[string]string{"a.txt": "x\ny\n", "b.md": "m\r\nn\n", "c.bin": "b\nc\n", "sub/d": "1\n2\n", "sub/e": "bin\x00\n", "f.up": "shout\n"}
	for p, c := range files {
		testutil.WriteFile(t, dir, p, c)
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-qm", "x")
	e.Reset(nil)
	for p := range files {
		blob := testutil.RunGit(t, dir, "cat-file", "blob", "HEAD:"+p)
		os.Remove(filepath.Join(dir, p))
		testutil.RunGit(t, dir, "checkout", "--", p)
		want, _ := os.ReadFile(filepath.Join(dir, p))
		got, err := e.Conv(p).Smudge([]byte(blob))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: memd writes %q, git %q", p, got, want)
		}
	}
}

// TestFilterCommand: clean and smudge commands run through sh with %f quoted; a failing
// one is a FilterError naming the driver; a required driver with no command fails too.
func TestFilterCommand(t *testing.T) {
	dir, e := repo(t, "*.up filter=up\n*.bad filter=bad\n*.req filter=req\n*.none filter=nodriver\n",
		"filter.up.clean", "printf '%%s:' %f; tr a-z A-Z", "filter.up.smudge", "tr A-Z a-z",
		"filter.bad.clean", "echo broken >&2; exit 3", "filter.req.required", "true")
	for _, rel := range []string{"a.up", "it's here.up"} {
		got, err := e.Conv(rel).Clean([]byte("hello\n"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := gitHash(t, dir, rel, []byte("hello\n")); blobID(got) != want {
			t.Errorf("clean %s = %q, git stores %s", rel, got, want)
		}
	}
	_, err := e.Conv("x.bad").Clean([]byte("x"), nil)
	var fe *FilterError
	if !errors.As(err, &fe) || fe.Driver != "bad" || !errors.Is(err, ErrFilter) || !strings.Contains(err.Error(), "broken") {
		t.Errorf("failing clean: %v", err)
	}
	if _, err := e.Conv("x.req").Clean([]byte("x"), nil); !errors.Is(err, ErrFilter) {
		t.Errorf("required driver without a command: %v", err)
	}
	c := e.Conv("x.none")
	if !c.Undefined() || c.Identity() {
		t.Errorf("undefined driver: %+v", c)
	}
	if out, err := c.Clean([]byte("raw"), nil); err != nil || string(out) != "raw" {
		t.Errorf("undefined driver stores %q, %v (git stores the bytes)", out, err)
	}
}

// TestIdentityFastPath: no attributes, no autocrlf: every path is Identity.
func TestIdentityFastPath(t *testing.T) {
	_, e := repo(t, "*.md diff=markdown\n")
	if c := e.Conv("a/b/c.md"); !c.Identity() {
		t.Errorf("Conv = %+v, want identity", c)
	}
}

func TestWildmatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"a/**/b", "a/b", true}, {"a/**/b", "a/x/y/b", true}, {"**/b", "x/b", true}, {"**/b", "b", true},
		{"a/**", "a/x/y", true}, {"a/*", "a/x/y", false}, {"a/*/c", "a/b/c", true}, {"*.txt", "d/a.txt", false},
		{"[a-c]?", "bz", true}, {"[!a-c]?", "bz", false}, {"a\\*", "a*", true}, {"[[:digit:]]x", "1x", true},
		{"areas/secret/**", "areas/secret/x/y.md", true}, {"a**b", "axb", true},
	} {
		if got := wildmatch(tc.p, tc.s, true); got != tc.want {
			t.Errorf("wildmatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

// TestProcessLFS speaks the long-running protocol to git-lfs's filter-process: the
// pointer is what git stores, the smudge gives the bytes back, and a killed process is
// started again on the next request.
func TestProcessLFS(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		t.Skip("git-lfs not installed")
	}
	dir, _ := repo(t, "*.png filter=lfs diff=lfs merge=lfs -text\n")
	testutil.RunGit(t, dir, "lfs", "install", "--local")
	e := New(dir, filepath.Join(dir, ".git"), configList(t, dir))
	t.Cleanup(e.Close)
	img := []byte(strings.Repeat("\x89PNG fake image bytes\x00", 5000))
	c := e.Conv("pics/a.png")
	if d := e.drivers["lfs"]; d == nil || d.Process == "" {
		t.Fatalf("lfs driver not read from config: %+v", e.drivers)
	}
	ptr, err := c.Clean(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ptr), "version https://git-lfs") {
		t.Fatalf("clean gave %q, want a pointer", ptr)
	}
	if want := gitHash(t, dir, "pics/a.png", img); blobID(ptr) != want {
		t.Errorf("pointer %s, git stores %s", blobID(ptr), want)
	}
	_ = killGroup(e.procs["lfs"].cmd)
	<-e.procs["lfs"].done
	back, err := c.Smudge(ptr)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(img) {
		t.Errorf("smudge after a restart gave %d bytes, want the image back", len(back))
	}
}
