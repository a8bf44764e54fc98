package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A memory whose name holds terminal escapes (an OSC 52 clipboard write, a C1 CSI, a bidi
// override), as a remote can deliver, is named by `memd doctor` as visible escapes; the
// --json report keeps the real name. On main the text report wrote the escapes raw.
func TestDoctorEscapesHostileNames(t *testing.T) {
	repo := t.TempDir()
	if code, _, stderr := runApp(t, "init", "--repo", repo); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	name := "evil\x1b]52;c;aGk=\x07\u009b2J\u202elmth.html"
	rel := filepath.Join("areas", name)
	if err := os.MkdirAll(filepath.Join(repo, "areas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, rel), []byte("<p>not a memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, out, stderr := runApp(t, "doctor", "--repo", repo)
	if !strings.Contains(out, `evil\x1b]52;c;aGk=\x07\u009b2J\u202elmth.html`) {
		t.Fatalf("doctor does not name the file as escapes:\n%s\n%s", out, stderr)
	}
	if strings.ContainsAny(out+stderr, "\x1b\x07\u009b\u202e") {
		t.Fatalf("doctor printed a control character raw: %q", out)
	}
	_, js, _ := runApp(t, "doctor", "--json", "--repo", repo)
	var rep struct{ Findings []struct{ Path string } }
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, js)
	}
	found := false
	for _, f := range rep.Findings {
		found = found || f.Path == filepath.ToSlash(rel)
	}
	if !found {
		t.Errorf("doctor --json lost the real name %q: %s", rel, js)
	}
}
