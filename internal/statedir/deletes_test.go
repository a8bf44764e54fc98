package statedir

import (
	"os"
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
