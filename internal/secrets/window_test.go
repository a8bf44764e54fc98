package secrets

import "testing"

// TestSpans: the window margins of gitleaks' rules that matter: the generic rule's match
// starts on its keyword's line and spans at most 9 more; a private key block spans any.
func TestSpans(t *testing.T) {
	rs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id         string
		lead, span int
	}{{"generic-api-key", 0, 9}, {"private-key", 0, unbounded}} {
		r := rs.rules[c.id]
		if r == nil {
			t.Fatalf("no rule %s", c.id)
		}
		if sh := r.shape(); sh.lead != c.lead || sh.span != c.span {
			t.Errorf("%s: lead %d span %d, want %d %d", c.id, sh.lead, sh.span, c.lead, c.span)
		}
		if (r.shape().probe != nil) != (c.id == "generic-api-key") {
			t.Errorf("%s: probe %v", c.id, r.shape().probe)
		}
	}
}

// TestWindowsFindWhatTheWholeTextFinds: on a long memory with keywords and secrets spread
// through it, matching in windows (and behind a probe) finds exactly what matching the
// whole text finds; so does a short text matched whole behind a probe.
func TestWindowsFindWhatTheWholeTextFinds(t *testing.T) {
	rs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	text := prose(3<<10, 7) + "api_key = \"" + "Zq8" + "x7LmPw2Rt9Vb4Nc6\"\n" + prose(3<<10, 13) + "token:\n\n  " + "Hk3" + "mQ9vTz2Lp8Wx5Rb\n" + prose(3<<10, 5)
	for _, text := range []string{text, "api_key = \"" + "Zq8" + "x7LmPw2Rt9Vb4Nc6\"\n<p>the api is down</p>\n"} {
		if n := matchAllWays(t, rs, text); n < 1 {
			t.Fatalf("only %d matches in %d bytes: the test proves nothing", n, len(text))
		}
	}
}

func matchAllWays(t *testing.T, rs *Rules, text string) int {
	lower := toLower(text)
	nl := newlines(text)
	n := 0
	for _, id := range rs.order {
		r := rs.rules[id]
		if r.regex == nil || r.windows(text, lower, nl) == nil && r.shape().probe == nil {
			continue // matched on the whole text anyway
		}
		whole := r.regex.FindAllStringIndex(text, -1)
		got := r.matches(text, lower, nl)
		if len(whole) != len(got) {
			t.Fatalf("%s: %d matches in windows, %d in the whole text", id, len(got), len(whole))
		}
		for i := range whole {
			if whole[i][0] != got[i][0] || whole[i][1] != got[i][1] {
				t.Fatalf("%s: match %d at %v in windows, %v in the whole text", id, i, got[i], whole[i])
			}
		}
		n += len(whole)
	}
	return n
}
