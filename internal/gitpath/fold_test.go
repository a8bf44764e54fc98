package gitpath

import (
	"errors"
	"testing"
)

func TestFoldCollisions(t *testing.T) {
	cases := []struct {
		a, b     string
		fs       FS
		collides bool
	}{
		{"A.html", "a.html", FS{IgnoreCase: true}, true},
		{"A.html", "a.html", FS{Normalizes: true}, false},
		{"A.html", "a.html", FS{}, false},
		{"caf\u00e9.html", "cafe\u0301.html", FS{Normalizes: true}, true},
		{"caf\u00e9.html", "cafe\u0301.html", FS{IgnoreCase: true}, true}, // folded names are compared in NFC
		{"caf\u00e9.html", "cafe\u0301.html", FS{}, false},
		{"CAF\u00c9.html", "cafe\u0301.html", Everywhere, true},
		{"straße", "STRASSE", Everywhere, true},
		{"a.html", "b.html", Everywhere, false},
		{"a.html", "a.html", Everywhere, false},
	}
	for _, c := range cases {
		err := c.fs.Collision(c.a, c.b)
		if (err != nil) != c.collides || err != nil && !errors.Is(err, ErrCollision) {
			t.Errorf("%+v.Collision(%q, %q) = %v, want collision %v", c.fs, c.a, c.b, err, c.collides)
		}
	}
}

// The probe of an ordinary Linux temp dir finds a byte-wise file system.
func TestProbeByteWise(t *testing.T) {
	fs, err := Probe(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("temp dir: %+v", fs)
}
