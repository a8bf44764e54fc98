package main

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// `memd doctor` names the remote helper the sync remote goes through, and one git cannot
// find is a problem (exit 1). Nothing is reached: the addresses lead nowhere.
func TestDoctorNamesRemoteHelper(t *testing.T) {
	repo := t.TempDir()
	if code, _, stderr := runApp(t, "init", "--repo", repo); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	git := func(args ...string) {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("remote", "add", "origin", "gcrypt::/nonexistent/memd/remote.git")
	code, out, stderr := runApp(t, "doctor", "--repo", repo)
	if !strings.Contains(out, "git-remote-gcrypt") || strings.Contains(out, "git cannot find") {
		t.Fatalf("doctor (exit %d) does not name gcrypt as installed:\n%s\n%s", code, out, stderr)
	}
	git("remote", "set-url", "origin", "nosuch::/nonexistent")
	code, out, _ = runApp(t, "doctor", "--repo", repo)
	if code != exitFailed || !strings.Contains(out, "git-remote-nosuch, which git cannot find") {
		t.Fatalf("doctor (exit %d) with a missing helper:\n%s", code, out)
	}
	_, js, _ := runApp(t, "doctor", "--json", "--repo", repo)
	var rep struct {
		Memories     *int `json:"memories"`
		RemoteHelper struct {
			Helper    string `json:"helper"`
			Installed bool   `json:"installed"`
		} `json:"remote_helper"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || rep.Memories == nil || rep.RemoteHelper.Helper != "nosuch" || rep.RemoteHelper.Installed {
		t.Fatalf("doctor --json: %v %+v\n%s", err, rep, js)
	}
}
