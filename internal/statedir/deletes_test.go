package statedir

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func TestDeletesRoundTrip(t *testing.T) {
	repo := t.TempDir()
	d, err := Create(memd.StateDir(repo))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if w, err := d.ReadDeletes(); err != nil || !reflect.DeepEqual(w, DeleteWindow{}) {
		t.Fatalf("none yet: %+v %v", w, err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	want := DeleteWindow{Local: DeleteSide{Marks: []DeleteMark{{At: now, N: 4}}, HeldAt: now.Add(time.Minute)},
		Remote: DeleteSide{Marks: []DeleteMark{{At: now, N: 2}}}}
	if err := d.WriteDeletes(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadDeletes()
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read %+v %v, want %+v", got, err, want)
	}
	if err := os.WriteFile(filepath.Join(d.Path(), DeletesFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadDeletes(); err == nil || !strings.Contains(err.Error(), DeletesFile) {
		t.Fatalf("a bad file: %v, want an error naming it", err)
	}
}

// deletesChildEnv names the state dir a child process of TestUpdateDeletesAcrossProcesses
// adds its marks to.
const deletesChildEnv = "MEMD_TEST_DELETES_CHILD"

const deletesChildMarks = 40

// A child of TestUpdateDeletesAcrossProcesses: deletesChildMarks updates, one mark each.
func TestUpdateDeletesChild(t *testing.T) {
	dir := os.Getenv(deletesChildEnv)
	if dir == "" {
		t.Skip("run by TestUpdateDeletesAcrossProcesses")
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for range deletesChildMarks {
		err := d.UpdateDeletes(func(w *DeleteWindow, readErr error) bool {
			if readErr != nil {
				t.Fatal(readErr)
			}
			// Between the read and the write, as a commit's brake decides: the window
			// another process's update must not come into.
			time.Sleep(time.Millisecond)
			w.Local.Marks = append(w.Local.Marks, DeleteMark{At: time.Now(), N: 1})
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Three processes (memd run and one-shot memd syncs, as this test binary run again) add to
// the brake's window at once: every mark is kept. Without UpdateDeletes's lock a process's
// write dropped the marks another added after its read.
func TestUpdateDeletesAcrossProcesses(t *testing.T) {
	repo := t.TempDir()
	sd := memd.StateDir(repo)
	d, err := Create(sd)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	const procs = 3
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestUpdateDeletesChild$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), deletesChildEnv+"="+sd)
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	w, err := d.ReadDeletes()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(w.Local.Marks), procs*deletesChildMarks; got != want {
		t.Fatalf("%d marks in the window after %d processes added %d each, want %d: updates lost", got, procs, deletesChildMarks, want)
	}
}
