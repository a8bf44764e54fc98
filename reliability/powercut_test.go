package reliability

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
)

// Power cuts (docs/ARCHITECTURE.md §9.7; docs/RELIABILITY.md "Power cuts"): crash images
// taken while `memd run` commits and pushes. The repo lives on an ext4 file system in an
// image file, itself on an XFS with reflink; a cut is `cp --reflink=always` of the image, the
// one atomic instant, with the kernel's background writeback held off so what was not
// fsynced is not in it (as after a power cut). Each image is then mounted (ext4 replays its
// journal) and checked: git fsck --full clean, git status works, memd starts on it and
// converges with the remote, every fsynced write made before the cut and every commit the
// remote had at the cut is there. Needs root, loop devices, mkfs.xfs and mkfs.ext4.
//
//	go test -run TestPowerCut ./reliability/                         2 cuts (make test, as root)
//	MEMD_RELIABILITY=long go test -run TestReliabilityPowerCut ...  24 cuts

func TestPowerCut(t *testing.T) {
	if isLong() {
		t.Skip("the long run is TestReliabilityPowerCut")
	}
	powerCuts(t, "power cut (crash image)", iterations(t, 2, 2))
}

func TestReliabilityPowerCut(t *testing.T) {
	if !isLong() {
		t.Skip("MEMD_RELIABILITY=long")
	}
	powerCuts(t, "power cut (crash image, long)", iterations(t, 2, 24))
}

// pcWrite is one memory written by the test's writers.
type pcWrite struct {
	rel, content string
	fsynced      bool
	done         time.Time // when the write (and its fsync) returned
}

// pcRow is the report row with the writes that were not fsynced.
type pcRow struct {
	row
	unsynced, unsyncedKept int
	pushedGone             int // of the others, pushed before the cut but gone from the image's work tree
	pushedEmpty            int // of those, an empty file in the image (ext4's delayed allocation)
	pushedReplaced         int // of those, not on the remote as written after memd ran on the image
}

// pcCut is one crash image.
type pcCut struct {
	img        string
	at         time.Time
	remoteHead string // the remote's main when the image was taken
}

func powerCuts(t *testing.T, name string, cuts int) {
	started := time.Now()
	rig := newCutRig(t)
	rng := scenarioRand(t, name)
	w := rig.world
	rig.holdWriteback()
	if out, code := w.memd("init", "--config", w.config, "--remote", w.bare, w.repo); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	// The first image right after init says "ready": what init made must be durable.
	images := []pcCut{rig.cut(0)}
	d := w.start()
	var mu sync.Mutex
	var writes []pcWrite
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for id := range 3 {
		writers.Add(1)
		go func(id int, fsync bool) {
			defer writers.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(20+id*15) * time.Millisecond):
				}
				rel := fmt.Sprintf("areas/pc/w%d-%04d.html", id, k)
				content := fmt.Sprintf("<p>writer %d write %d fsync=%v</p>\n%s", id, k, fsync, strings.Repeat("x", 50*k%2000))
				if err := pcWriteFile(filepath.Join(w.repo, rel), content, fsync); err != nil {
					t.Errorf("write %s: %v", rel, err)
					return
				}
				mu.Lock()
				writes = append(writes, pcWrite{rel: rel, content: content, fsynced: fsync, done: time.Now()})
				mu.Unlock()
			}
		}(id, id != 2) // writers 0 and 1 fsync, writer 2 does not
	}
	for i := 1; i < cuts; i++ {
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		images = append(images, rig.cut(i))
	}
	close(stop)
	writers.Wait()
	rig.releaseWriteback()
	if ok, last := w.settled(settleTimeout); !ok {
		t.Fatalf("live run did not settle: %s\n%s", last, d.Logs())
	}
	d.Stop()
	r := pcRow{row: row{Scenario: name, Iterations: len(images)}}
	for _, c := range images {
		rig.check(c, writes, &r)
	}
	r.Time = time.Since(started)
	r.Note = fmt.Sprintf("writes: fsynced before a cut, summed over the cuts; not fsynced: %d of %d kept whole in the images; %d of the lost ones had been pushed (%d empty in the image), and after memd ran on the image %d of those were no longer on the remote as written", r.unsyncedKept, r.unsynced, r.pushedGone, r.pushedEmpty, r.pushedReplaced)
	record(t, r.row)
}

// pcWriteFile writes a new file; fsync: the file and its folder are made durable before
// it returns (what a careful writer does), else the data is left to writeback.
func pcWriteFile(p, content string, fsync bool) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(content)
	if err == nil && fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || !fsync {
		return err
	}
	dir, err := os.Open(filepath.Dir(p))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// cutRig is the nested file systems: outer XFS (reflink) holding the inner ext4 image the
// repo lives on; the remote is outside both (another machine, durable).
type cutRig struct {
	t                 *testing.T
	base, outer, live string
	world             *world
	sysctl            map[string]string // writeback settings to restore
	n                 int
}

func newCutRig(t *testing.T) *cutRig {
	if os.Geteuid() != 0 {
		t.Skip("power cuts need root (loop devices, mount)")
	}
	for _, tool := range []string{"mkfs.xfs", "mkfs.ext4", "mount", "umount", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("power cuts need %s: %v", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("power cuts need loop devices: %v", err)
	}
	base := t.TempDir()
	rig := &cutRig{t: t, base: base, outer: filepath.Join(base, "outer"), live: filepath.Join(base, "live")}
	must(t, os.MkdirAll(rig.outer, 0o755))
	must(t, os.MkdirAll(rig.live, 0o755))
	outerImg := filepath.Join(base, "outer.img")
	rig.sh("truncate", "-s", "2G", outerImg)
	if out, err := exec.Command("mkfs.xfs", "-q", "-m", "reflink=1", outerImg).CombinedOutput(); err != nil {
		t.Skipf("mkfs.xfs -m reflink=1: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", outerImg, rig.outer).CombinedOutput(); err != nil {
		t.Skipf("loop mount of an XFS image: %v %s", err, out)
	}
	t.Cleanup(func() { rig.unmount(rig.outer) })
	inner := filepath.Join(rig.outer, "inner.img")
	rig.sh("truncate", "-s", "512M", inner)
	rig.sh("mkfs.ext4", "-q", "-F", inner)
	rig.sh("mount", "-o", "loop", inner, rig.live)
	t.Cleanup(func() { rig.unmount(rig.live) })

	w := newWorld(t, worldOpts{noInit: true})
	w.repo = filepath.Join(rig.live, "memory")
	w.bare = filepath.Join(w.home, "remote.git")
	w.gitIn(w.home, "init", "-q", "--bare", "-b", "main", w.bare)
	w.gitIn(w.bare, "config", "gc.autoDetach", "false")
	rig.world = w
	return rig
}

func (rig *cutRig) sh(args ...string) {
	rig.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		rig.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (rig *cutRig) unmount(dir string) {
	for range 50 {
		if err := exec.Command("umount", dir).Run(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	rig.t.Errorf("umount %s failed", dir)
}

// writebackHeld is the value holdWriteback sets: an hour, longer than any run.
const writebackHeld = "360000"

// holdWriteback keeps the kernel from writing dirty pages back on its own until
// releaseWriteback (or the test's end): what is not fsynced stays out of the images.
func (rig *cutRig) holdWriteback() {
	rig.sysctl = map[string]string{}
	for _, k := range []string{"dirty_writeback_centisecs", "dirty_expire_centisecs"} {
		p := "/proc/sys/vm/" + k
		old, err := os.ReadFile(p)
		if err != nil {
			rig.t.Skipf("read %s: %v", p, err)
		}
		rig.sysctl[p] = strings.TrimSpace(string(old))
		if rig.sysctl[p] == writebackHeld { // another run's hold: give back the kernel's defaults
			rig.sysctl[p] = map[string]string{"dirty_writeback_centisecs": "500", "dirty_expire_centisecs": "3000"}[k]
		}
		if err := os.WriteFile(p, []byte(writebackHeld+"\n"), 0o644); err != nil {
			rig.t.Skipf("hold writeback off (%s): %v", p, err)
		}
	}
	rig.t.Cleanup(rig.releaseWriteback)
}

func (rig *cutRig) releaseWriteback() {
	for p, v := range rig.sysctl {
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			rig.t.Errorf("restore %s: %v", p, err)
		}
	}
	rig.sysctl = nil
}

// cut takes a crash image: a reflink copy of the live ext4 image, one atomic instant.
func (rig *cutRig) cut(i int) pcCut {
	c := pcCut{img: filepath.Join(rig.outer, fmt.Sprintf("cut-%02d.img", i)), at: time.Now()}
	c.remoteHead, _ = rig.world.gitRun(rig.world.bare, nil, "rev-parse", "-q", "--verify", "refs/heads/main")
	c.remoteHead = strings.TrimSpace(c.remoteHead)
	if out, err := exec.Command("cp", "--reflink=always", filepath.Join(rig.outer, "inner.img"), c.img).CombinedOutput(); err != nil {
		rig.t.Fatalf("cp --reflink=always: %v\n%s", err, out)
	}
	return c
}

// check mounts one image and holds it to the promise of docs/ARCHITECTURE.md §9.7.
func (rig *cutRig) check(c pcCut, writes []pcWrite, r *pcRow) {
	t, lw := rig.t, rig.world
	rig.n++
	mnt := filepath.Join(rig.base, fmt.Sprintf("cut%d", rig.n))
	must(t, os.MkdirAll(mnt, 0o755))
	rig.sh("mount", "-o", "loop", c.img, mnt) // ext4 replays its journal here
	defer rig.unmount(mnt)
	w := &world{t: t, home: lw.home, repo: filepath.Join(mnt, "memory"), bare: lw.bare, config: lw.config, env: lw.env}
	name := filepath.Base(c.img)
	if out, err := w.gitRun(w.repo, nil, "fsck", "--full", "--no-dangling"); err != nil {
		r.Corruptions++
		t.Errorf("%s: git fsck --full: %v\n%s", name, err, out)
	}
	if _, err := w.gitRun(w.repo, nil, "status", "--porcelain"); err != nil {
		r.Corruptions++
		t.Errorf("%s: git status: %v", name, err)
	}
	lostPushed := unsyncedFate(w, c, writes, r)
	emptied := cutEmptied(w)
	d := w.start()
	// The files the cut emptied where HEAD has the memory are held, not committed (reason
	// cut); the user's cure, as the status says, is git's own checkout of HEAD's version.
	if len(emptied) > 0 {
		var held []string
		if !testutil.Poll(settleTimeout, func() bool { held = cutHeld(w); return strings.Join(held, " ") == strings.Join(emptied, " ") }) {
			r.Corruptions++
			t.Errorf("%s: held as emptied by the cut: %v, want %v\n%s", name, held, emptied, d.Logs())
		}
		if out, err := w.gitRun(w.repo, nil, append([]string{"checkout", "--"}, emptied...)...); err != nil {
			t.Errorf("%s: git checkout of the emptied files: %v\n%s", name, err, out)
		}
	}
	if ok, last := w.settled(settleTimeout); !ok {
		r.Corruptions++
		t.Errorf("%s: memd did not converge with the remote: %s\n%s", name, last, d.Logs())
	}
	d.Stop()
	if out, err := w.gitRun(w.repo, nil, "fsck", "--full", "--no-dangling"); err != nil {
		r.Corruptions++
		t.Errorf("%s: git fsck --full after memd: %v\n%s", name, err, out)
	}
	// What became of the pushed writes the image lost (their writers did not fsync): each
	// is still on the remote as written; the emptied file was held, not pushed over it.
	for _, wr := range lostPushed {
		if got, err := w.gitRun(w.bare, nil, "cat-file", "blob", "main:"+wr.rel); err != nil || got != wr.content {
			r.pushedReplaced++
			r.Corruptions++
			t.Errorf("%s: %s, pushed before the cut and lost by the image, is no longer on the remote as written (%v)", name, wr.rel, err)
		}
	}
	if c.remoteHead != "" && !w.isAncestor(w.repo, c.remoteHead, "HEAD") {
		r.Corruptions++
		t.Errorf("%s: the remote's commit %s at the cut is not in HEAD", name, c.remoteHead)
	}
	for _, wr := range writes {
		if !wr.fsynced || !wr.done.Before(c.at) {
			continue
		}
		r.Writes++
		got, err := w.gitRun(w.bare, nil, "cat-file", "blob", "main:"+wr.rel)
		if err != nil || !bytes.Equal([]byte(got), []byte(wr.content)) {
			r.Corruptions++
			t.Errorf("%s: fsynced write %s (before the cut) not on the remote as written: %v", name, wr.rel, err)
			continue
		}
		r.Found++
	}
}

// cutEmptied is the image's files that are empty or all zero bytes where its HEAD's
// version is not: what memd holds after the unclean stop (agent/cutheld.go), sorted.
func cutEmptied(w *world) []string {
	ls, err := w.gitRun(w.repo, nil, "ls-tree", "-r", "-l", "HEAD")
	if err != nil {
		w.t.Fatalf("ls-tree in the image: %v", err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(ls), "\n") {
		meta, rel, ok := strings.Cut(l, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 4 || f[1] != "blob" || f[3] == "0" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(w.repo, filepath.FromSlash(rel)))
		if err == nil && len(bytes.Trim(b, "\x00")) == 0 {
			out = append(out, rel)
		}
	}
	sort.Strings(out)
	return out
}

// cutHeld is the paths memd's status document lists as held for reason cut, sorted.
func cutHeld(w *world) []string {
	doc, err := statusline.Read(memd.StateDir(w.repo))
	if err != nil {
		return nil
	}
	var out []string
	for _, h := range doc.Held {
		if h.Reason == statusline.HeldCut {
			out = append(out, h.Path)
		}
	}
	sort.Strings(out)
	return out
}

// unsyncedFate counts what an image kept of the writes not fsynced before its cut (the
// figures show the cut is a real one: most are gone) and returns those that had been pushed.
func unsyncedFate(w *world, c pcCut, writes []pcWrite, r *pcRow) []pcWrite {
	var lostPushed []pcWrite
	pushed := map[string]bool{} // on the remote at the cut
	if c.remoteHead != "" {
		ls, _ := w.gitRun(w.bare, nil, "ls-tree", "-r", "--name-only", c.remoteHead, "areas/pc/")
		for _, l := range strings.Split(ls, "\n") {
			pushed[l] = true
		}
	}
	for _, wr := range writes {
		if wr.fsynced || !wr.done.Before(c.at) {
			continue
		}
		r.unsynced++
		b, err := os.ReadFile(filepath.Join(w.repo, wr.rel))
		switch {
		case err == nil && string(b) == wr.content:
			r.unsyncedKept++
		case pushed[wr.rel]:
			r.pushedGone++ // committed and pushed, but the file itself never reached the disk
			if err == nil && len(b) == 0 {
				r.pushedEmpty++
			}
			lostPushed = append(lostPushed, wr)
		}
	}
	return lostPushed
}
