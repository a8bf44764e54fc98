package remotehelper

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/sync/gitremote"
)

func TestFor(t *testing.T) {
	for _, c := range []struct{ url, vcs, want string }{
		{"gcrypt::/srv/memory.git", "", "gcrypt"},
		{"gcrypt::rsync://host/path", "", "gcrypt"},
		{"codecommit::eu-west-1://memory", "", "codecommit"},
		{"git+ssh2::x", "", "git+ssh2"},
		{"s3://bucket/memory", "", "s3"},
		{"keybase://private/me/memory", "", "keybase"},
		{"/srv/memory.git", "", ""},
		{"../memory.git", "", ""},
		{"file:///srv/memory.git", "", ""},
		{"https://github.com/me/memory.git", "", ""},
		{"http://127.0.0.1:8080/memory.git", "", ""},
		{"ssh://git@github.com/me/memory.git", "", ""},
		{"git@github.com:me/memory.git", "", ""},
		{"git://host/memory.git", "", ""},
		{"host:memory.git", "", ""},
		{"1abc::x", "", ""}, // a transport starts with a letter
		{"/srv/memory.git", "hg", "hg"},
		{"", "hg", "hg"},
	} {
		if got := For(c.url, c.vcs); got != c.want {
			t.Errorf("For(%q, %q) = %q, want %q", c.url, c.vcs, got, c.want)
		}
	}
}

func TestWords(t *testing.T) {
	offline := "fatal: unable to access 'http://127.0.0.1:9/r.git/': Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server\n" +
		"gcrypt: Repository not found: http://127.0.0.1:9/r.git\ngcrypt: ..but repository ID is set. Aborting.\n"
	w, kinds := Words(offline)
	if len(kinds) != 1 || kinds[0] != gitremote.ErrOffline || !strings.Contains(w, "Couldn't connect") || !strings.HasSuffix(w, "Aborting.") {
		t.Errorf("offline: %q %v", w, kinds)
	}
	ssh := "ssh: connect to host 127.0.0.1 port 9: Connection refused\nfatal: Could not read from remote repository.\n\n" +
		"Please make sure you have the correct access rights\nand the repository exists.\n"
	if w, kinds := Words(ssh); len(kinds) != 1 || kinds[0] != gitremote.ErrOffline || !strings.Contains(w, "Connection refused") {
		t.Errorf("ssh offline: %q %v", w, kinds)
	}
	failing := "gcrypt: Decrypting manifest\ngpg: decryption failed: No secret key\ngcrypt: Failed to decrypt manifest!\n"
	if w, kinds := Words(failing); len(kinds) != 0 || w != "gcrypt: Failed to decrypt manifest!" {
		t.Errorf("failing: %q %v", w, kinds)
	}
	if w, kinds := Words("Permission denied (publickey).\nfatal: Could not read from remote repository.\n"); len(kinds) != 1 || kinds[0] != gitremote.ErrAuth {
		t.Errorf("auth: %q %v", w, kinds)
	}
	if w, _ := Words(strings.Repeat("é", 1000)); len(w) > maxWords+len("…") || !strings.HasSuffix(w, "…") {
		t.Errorf("uncapped: %d bytes", len(w))
	}
}

func TestEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "GNUPGHOME=/h/g", "SSH_AUTH_SOCK=/s", "MEMD_GIT_TOKEN=t1", "MYTOKEN=t2",
		"GIT_DIR=/elsewhere", "GIT_INDEX_FILE=/x", "DISPLAY=:0", "GPG_TTY=/dev/pts/1", "AWS_PROFILE=p",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=a.b", "GIT_CONFIG_VALUE_0=c", "MEMD_OTHER=x"}
	got := strings.Join(Env(environ, []string{"MYTOKEN"}), " ")
	for _, want := range []string{"PATH=/bin", "HOME=/h", "GNUPGHOME=/h/g", "SSH_AUTH_SOCK=/s", "AWS_PROFILE=p",
		"GIT_CONFIG_KEY_0=a.b", "GIT_CONFIG_VALUE_0=c", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"} {
		if !strings.Contains(got, want) {
			t.Errorf("env lacks %s: %s", want, got)
		}
	}
	for _, bad := range []string{"t1", "t2", "GIT_DIR", "GIT_INDEX_FILE", "DISPLAY", "GPG_TTY", "MEMD_OTHER"} {
		if strings.Contains(got, bad) {
			t.Errorf("env has %s: %s", bad, got)
		}
	}
	if procgroup.TokenVar != "MEMD_GIT_TOKEN" {
		t.Fatalf("the test's token name is %s", procgroup.TokenVar)
	}
}

// A name git would read as an option is refused before any git runs.
func TestOptionLikeNamesRefused(t *testing.T) {
	for _, rm := range []Remote{{Name: "--upload-pack=touch /tmp/x", Helper: "x"}, {Name: "origin", Helper: "x"}} {
		branch := "main"
		if rm.Name == "origin" {
			branch = "-x"
		}
		if _, err := rm.Fetch(context.Background(), branch); err == nil || !strings.Contains(err.Error(), "not names git takes") {
			t.Errorf("Fetch with %q %q: %v", rm.Name, branch, err)
		}
		if err := rm.Push(context.Background(), strings.Repeat("a", 40), branch); err == nil {
			t.Errorf("Push with %q %q went ahead", rm.Name, branch)
		}
	}
}

// A helper that is not installed is an error (not offline) that says so; memd's git run
// reaches no helper of its own.
func TestMissingHelper(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	git("remote", "add", "origin", "nosuch::"+filepath.Join(dir, "x"))
	rm := Remote{Dir: dir, Name: "origin", URL: "nosuch::" + filepath.Join(dir, "x"), Helper: "nosuch"}
	_, err := rm.Head(context.Background(), "main")
	if err == nil || errors.Is(err, gitremote.ErrOffline) || !strings.Contains(err.Error(), "git-remote-nosuch is not installed") {
		t.Fatalf("Head: %v", err)
	}
	if Installed("nosuch") {
		t.Error("Installed(nosuch)")
	}
	in, ok := Describe(context.Background(), dir, "origin")
	if !ok || in.Helper != "nosuch" || in.Installed {
		t.Errorf("Describe = %+v, %v", in, ok)
	}
}
