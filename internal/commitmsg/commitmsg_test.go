package commitmsg

import "testing"

func TestTrailersRejectsProse(t *testing.T) {
	if tr := Trailers("subject only"); tr != nil {
		t.Fatalf("%v", tr)
	}
	if tr := Trailers("s\n\nsome prose here\nKey: v"); tr != nil {
		t.Fatalf("prose parsed as trailers: %v", tr)
	}
	if tr := Trailers("s\n\nbody\n\nA: 1\nB: two words\n"); tr["A"] != "1" || tr["B"] != "two words" {
		t.Fatalf("%v", tr)
	}
}

// A sleep commit's trailers read back as sleep wrote them, after the subject's blank line.
func TestTrailersOfASleepCommit(t *testing.T) {
	tr := Trailers("sleep(arcs): arcs=2\n\nMemd-Run: 20261130T030000Z\nMemd-Phase: arcs\nMemd-Counts: arcs=2,members=5\n")
	if tr["Memd-Run"] != "20261130T030000Z" || tr["Memd-Phase"] != "arcs" || tr["Memd-Counts"] != "arcs=2,members=5" || len(tr) != 3 {
		t.Fatalf("%v", tr)
	}
}
