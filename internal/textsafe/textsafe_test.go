package textsafe

import "testing"

func TestEscape(t *testing.T) {
	cases := []struct{ in, want string }{
		{"areas/people/sanju.html", "areas/people/sanju.html"},
		{"café/naïve — ok", "café/naïve — ok"},
		{"x\x1b]52;c;aGk=\x07.html", `x\x1b]52;c;aGk=\x07.html`},
		{"\x1b]8;;http://evil\x1b\\link", `\x1b]8;;http://evil\x1b\link`},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"raw c1 \x9b", `raw c1 \x9b`},
		{"del\x7f", `del\x7f`},
		{"x.html\n..\n--all\n-rf", `x.html\n..\n--all\n-rf`},
		{"tab\there\r", `tab\there\r`},
		{"evil\u202elmth.exe", `evil\u202elmth.exe`},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\u2029",
			`\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u2028\u2029`},
		{"nul\x00", `nul\x00`},
	}
	for _, c := range cases {
		if got := Escape(c.in); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
		if Clean(Escape(c.in)) != true {
			t.Errorf("Escape(%q) is not clean", c.in)
		}
	}
}

func TestLine(t *testing.T) {
	if got := Line("warming up\nfatal: \x1b[31mno such index\x1b[0m\n\n", 100); got != `fatal: \x1b[31mno such index\x1b[0m` {
		t.Errorf("Line = %q", got)
	}
	if got := Line("ééééé", 5); got != "éé…" {
		t.Errorf("Line cap = %q", got)
	}
}

func FuzzEscape(f *testing.F) {
	f.Add("x\x1b\u202e\xff")
	f.Fuzz(func(t *testing.T, s string) {
		if e := Escape(s); !Clean(e) {
			t.Fatalf("Escape(%q) = %q holds a control", s, e)
		}
	})
}
