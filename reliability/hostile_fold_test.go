package reliability

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// caseInsensitiveDir makes a case-insensitive file system for the test and returns a
// directory on it. Tried in order: an ext4 image with casefold (needs a kernel with
// CONFIG_UNICODE), a vfat image on a loop device (needs the vfat module), a vfat image
// through FUSE (fusefat). Each needs root. It skips loudly when none works; under CI=true
// only when the machine truly cannot (no root, no /dev/fuse), saying why.
func caseInsensitiveDir(t *testing.T) string {
	t.Helper()
	var why []string
	impossible := func(reason string) {
		why = append(why, reason)
	}
	if os.Geteuid() != 0 {
		impossible("not root: mounting an image needs root")
		t.Skipf("NOTE: no case-insensitive file system can be made here (%s)", strings.Join(why, "; "))
	}
	base := t.TempDir()
	img := filepath.Join(base, "fs.img")
	mnt := filepath.Join(base, "mnt")
	must(t, os.MkdirAll(mnt, 0o755))
	run := func(name string, args ...string) error {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			return &exec.Error{Name: name + " " + strings.Join(args, " ") + ": " + strings.TrimSpace(string(out)), Err: err}
		}
		return nil
	}
	image := func(size string) {
		_ = os.Remove(img)
		must(t, exec.Command("truncate", "-s", size, img).Run())
	}
	// ext4 with casefold: the folder itself must carry +F.
	image("64M")
	if err := run("mkfs.ext4", "-q", "-F", "-O", "casefold", img); err != nil {
		impossible("mkfs.ext4 -O casefold: " + err.Error())
	} else if err := run("mount", "-o", "loop", img, mnt); err != nil {
		impossible("ext4 casefold mount (kernel without CONFIG_UNICODE?): " + err.Error())
	} else {
		t.Cleanup(func() { _ = run("umount", mnt) })
		d := filepath.Join(mnt, "ci")
		must(t, os.Mkdir(d, 0o755))
		if err := run("chattr", "+F", d); err == nil {
			t.Log("case-insensitive file system: ext4 casefold")
			return d
		}
		impossible("chattr +F failed")
	}
	image("128M")
	if err := run("mkfs.vfat", img); err != nil {
		impossible("mkfs.vfat (apt-get install dosfstools): " + err.Error())
	} else if err := run("mount", "-o", "loop", img, mnt); err == nil {
		t.Cleanup(func() { _ = run("umount", mnt) })
		t.Log("case-insensitive file system: vfat on a loop device")
		return mnt
	} else {
		impossible("vfat loop mount (no vfat module?): " + err.Error())
		if _, err := exec.LookPath("fusefat"); err != nil {
			impossible("no fusefat (apt-get install fusefat)")
		} else if err := run("fusefat", "-o", "rw+", img, mnt); err != nil {
			impossible("fusefat: " + err.Error())
		} else {
			t.Cleanup(func() { _ = run("fusermount", "-u", mnt) })
			t.Log("case-insensitive file system: vfat through FUSE (fusefat)")
			return mnt
		}
	}
	msg := "NOTE: no case-insensitive file system can be made here: " + strings.Join(why, "; ")
	if os.Getenv("CI") == "true" {
		if _, err := os.Stat("/dev/fuse"); err == nil {
			t.Fatal(msg + " (CI=true and /dev/fuse exists: install fusefat and dosfstools)")
		}
	}
	t.Skip(msg)
	return ""
}

// A fetched tree holding A.html and a.html, on a case-insensitive work tree (made in the
// test): refused like a duplicate name, naming the commit and both names, before anything
// is checked out; nothing outside changes; a later good commit recovers. On main both
// entries were checked out onto one file (one lost).
func TestHostileCaseFoldCollision(t *testing.T) {
	fsDir := caseInsensitiveDir(t)
	w := newWorld(t, worldOpts{noInit: true})
	w.repo = filepath.Join(fsDir, "memory")
	// The git dir stays on a file system git can write (vfat has no chmod, FUSE no
	// tmp_pack renames): .git is a bind mount of a folder on the temp file system.
	gitDir := filepath.Join(w.home, "gitdir")
	must(t, os.MkdirAll(gitDir, 0o755))
	must(t, os.MkdirAll(filepath.Join(w.repo, ".git"), 0o755))
	if out, err := exec.Command("mount", "--bind", gitDir, filepath.Join(w.repo, ".git")).CombinedOutput(); err != nil {
		t.Skipf("NOTE: cannot bind-mount the git dir into the case-insensitive file system: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", filepath.Join(w.repo, ".git")).Run() })
	w.bare = filepath.Join(w.home, "remote.git")
	w.gitIn(w.home, "init", "-q", "--bare", "-b", "main", w.bare)
	if out, code := w.memd("init", "--config", w.config, "--remote", w.bare, w.repo); code != 0 {
		t.Fatalf("memd init on the case-insensitive file system: exit %d\n%s", code, out)
	}
	u := &utWorld{world: w, obj: testutil.Objects{T: t, Dir: w.bare}, outside: filepath.Join(w.home, "outside"),
		when: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	must(t, os.MkdirAll(u.outside, 0o755))
	u.gclone = filepath.Join(w.home, "gitclone")
	w.gitIn(w.home, "clone", "-q", w.bare, u.gclone)

	bad := u.push("two names, one file", u.remoteRoot(testutil.TreeDir("areas",
		testutil.TreeFile("A.html", "upper\n"), testutil.TreeFile("a.html", "lower\n")))...)
	w.write("areas/local.html", "local work\n")
	// The git dir lives outside the work tree here: what a fetch and a commit change in it
	// is left out, as outsideSnapshot leaves it out of a .git inside.
	snap := func() map[string]string {
		m := u.outsideSnapshot()
		for p := range m {
			rel, err := filepath.Rel(gitDir, p)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			first, _, _ := strings.Cut(rel, string(filepath.Separator))
			switch first {
			case "objects", "refs", "logs", "memd", "index", "FETCH_HEAD", "ORIG_HEAD", "packed-refs":
				delete(m, p)
			}
		}
		return m
	}
	before := snap()
	head := w.head()
	out, code := w.memd("sync", "--config", w.config, "--repo", w.repo)
	t.Logf("memd sync: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, bad[:12]) || !strings.Contains(out, "differs only in case") {
		t.Fatalf("memd sync did not refuse the colliding names of %s:\n%s", bad[:12], out)
	}
	if d := utDiff(before, snap()); d != "" {
		t.Fatalf("memd sync changed things outside the work tree:\n%s", d)
	}
	if w.isAncestor(w.repo, bad, "HEAD") {
		t.Fatal("the colliding commit was merged")
	}
	if _, err := os.Lstat(w.path("areas/a.html")); err == nil {
		t.Fatal("a colliding entry was checked out")
	}
	if got := w.git("show", "HEAD:areas/local.html"); !strings.Contains(got, "local work") || !w.isAncestor(w.repo, head, "HEAD") {
		t.Fatalf("the local commit is missing: %q", got)
	}
	// Plain git with core.ignorecase=true (what a clone here records) on the same commit.
	gout, _ := w.gitRun(u.gclone, nil, "-c", "core.ignorecase=true", "pull", "-q", "--ff-only", "origin", "main")
	t.Logf("git pull (core.ignorecase=true) of %s: %s", bad[:12], firstLines(gout, 3))

	// Recovery: upstream drops one of the two.
	good := u.push("one name", u.remoteRoot(testutil.TreeDir("areas", testutil.TreeFile("A.html", "upper\n")))...)
	if out, code := w.memd("sync", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd sync after the fix: exit %d\n%s", code, out)
	}
	if !w.isAncestor(w.repo, good, "HEAD") {
		t.Fatal("the good commit was not merged")
	}
}

// The same Unicode text composed and decomposed (é as U+00E9 and as e + U+0301), fetched
// onto a file system that keeps them apart (Linux): checked out, with a warning naming the
// commit and path, since a clone on a Mac would lose one. On main nothing said so.
func TestHostileNormalisationCollisionWarns(t *testing.T) {
	u := newUTWorld(t)
	bad := u.push("two forms of café", u.remoteRoot(testutil.TreeDir("areas",
		testutil.TreeFile("caf\u00e9.html", "composed\n"), testutil.TreeFile("cafe\u0301.html", "decomposed\n")))...)
	out := u.sync(0)
	if !strings.Contains(out, "a clone there would lose one") || !strings.Contains(out, bad[:12]) || !strings.Contains(out, "composed vs decomposed") {
		t.Fatalf("memd sync did not warn about the normalisation collision in %s:\n%s", bad[:12], out)
	}
	for _, n := range []string{"caf\u00e9.html", "cafe\u0301.html"} {
		if _, err := os.Lstat(u.path("areas/" + n)); err != nil {
			t.Errorf("%q not checked out on a byte-wise file system: %v", n, err)
		}
	}
	refused, gout := u.gitPull()
	t.Logf("git pull: refused=%v %s", refused, firstLines(gout, 2))
}
