package memd

import (
	"errors"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNormalizePath(t *testing.T) {
	cases := map[string]string{
		"":                         "",
		"/":                        "",
		"///":                      "",
		"areas/x.html":             "areas/x.html",
		"/areas/x.html":            "areas/x.html",
		"///areas//inbox///x.html": "areas/inbox/x.html",
		"areas/inbox/":             "areas/inbox",
		"areas/inbox//":            "areas/inbox",
		"a//b//":                   "a/b",
		"a/./b":                    "a/./b", // normalising is not resolving: "." stays for PathViolation to name
	}
	for in, want := range cases {
		if got := NormalizePath(in); got != want {
			t.Errorf("NormalizePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPathViolation(t *testing.T) {
	valid := []string{
		"areas/inbox/x.html",
		"projects/memd/tasks/fix.html",
		"resources/people/sanju-rao.html",
		"archive/2024/areas/inbox/20240101-x.html",
		"areas/x y.html",
		"areas/ünïcode.html",
	}
	for _, p := range valid {
		if v := PathViolation(p); v != "" {
			t.Errorf("PathViolation(%q) = %q, want valid", p, v)
		}
		if !ValidMemoryPath(p) {
			t.Errorf("ValidMemoryPath(%q) = false", p)
		}
	}
	invalid := map[string]string{ // path -> a fragment the message must contain
		"":                         "empty",
		"/areas/x.html":            "leading slash",
		"areas//x.html":            "empty segment",
		"areas/x.html/":            "ends in a slash",
		"areas/../etc/passwd.html": `".."`,
		"areas/./x.html":           `"."`,
		"x.html":                   "not inside a bucket",
		"notes/x.html":             `"notes"`,
		"areas/x.md":               `".md"`,
		"areas/README":             "no extension",
		"areas/.html":              "empty file name",
		"areas\\x.html":            "backslash",
		"areas/x\n.html":           "control character",
		"areas/\xff.html":          "UTF-8",
		"Areas/x.html":             `"Areas"`,
		"areas/x.HTML":             `".HTML"`,
	}
	for p, frag := range invalid {
		v := PathViolation(p)
		if v == "" {
			t.Errorf("PathViolation(%q) = \"\", want a violation", p)
			continue
		}
		if !strings.Contains(v, frag) {
			t.Errorf("PathViolation(%q) = %q, want it to mention %s", p, v, frag)
		}
		if p != "" && !strings.Contains(v, strconv.Quote(p)) {
			t.Errorf("PathViolation(%q) = %q does not name the input", p, v)
		}
		if ValidMemoryPath(p) {
			t.Errorf("ValidMemoryPath(%q) = true", p)
		}
	}
}

func TestBucketOf(t *testing.T) {
	cases := map[string]Bucket{
		"projects/a/b.html": "projects",
		"/areas/x.html":     "areas",
		"resources":         "resources",
		"archive/2024/x":    "archive",
		"areasx/y":          "",
		"":                  "",
		"memory.jsonl":      "",
	}
	for in, want := range cases {
		if got := BucketOf(in); got != want {
			t.Errorf("BucketOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArchiveRoundTrip(t *testing.T) {
	p := "areas/inbox/20240301-deploy.html"
	a := ArchivePath(p, 2024)
	if a != "archive/2024/areas/inbox/20240301-deploy.html" {
		t.Fatalf("ArchivePath = %q", a)
	}
	if !IsArchived(a) || IsArchived(p) {
		t.Fatalf("IsArchived wrong for %q / %q", a, p)
	}
	if y, ok := ArchiveYear(a); !ok || y != 2024 {
		t.Fatalf("ArchiveYear(%q) = %d, %v", a, y, ok)
	}
	orig, y, ok := UnarchivePath(a)
	if !ok || orig != p || y != 2024 {
		t.Fatalf("UnarchivePath(%q) = %q, %d, %v", a, orig, y, ok)
	}
	// Archived twice: one strip gives back the once-archived path.
	aa := ArchivePath(a, 2025)
	orig, y, ok = UnarchivePath(aa)
	if !ok || orig != a || y != 2025 {
		t.Fatalf("UnarchivePath(%q) = %q, %d, %v", aa, orig, y, ok)
	}
	if ArchivePath("/areas//x.html", 7) != "archive/0007/areas/x.html" {
		t.Fatalf("ArchivePath pads and normalises: %q", ArchivePath("/areas//x.html", 7))
	}
	for _, p := range []string{"archive/x.html", "archive/20x4/a.html", "archive/2024", "areas/2024/x.html", "archive/123/x.html"} {
		if _, _, ok := UnarchivePath(p); ok {
			t.Errorf("UnarchivePath(%q) ok, want not archived", p)
		}
	}
	if y, ok := ArchiveYear("archive/2024"); !ok || y != 2024 {
		t.Errorf("ArchiveYear(archive/2024) = %d, %v", y, ok)
	}
	if IsArchived("archive/notes.html") {
		t.Errorf("archive without a year partition counted as archived")
	}
}

func TestPlace(t *testing.T) {
	cases := []struct {
		in   PlacementInput
		want string
	}{
		{PlacementInput{Path: "/projects/x//y.html", MemoryType: "arc"}, "projects/x"},
		{PlacementInput{Path: "../evil.html", MemoryType: "arc"}, ArcsDir},
		{PlacementInput{MemoryType: "arc", Workspace: "w"}, ArcsDir},
		{PlacementInput{MemoryType: "task", Workspace: "Checkout API"}, "projects/checkout-api/tasks"},
		{PlacementInput{MemoryType: "task", Entities: []string{"person:sanju"}}, TaskInboxDir},
		{PlacementInput{MemoryType: "semantic", Entities: []string{"service:x", "person:Sanju Rao"}, Workspace: "w"}, PeopleDir},
		{PlacementInput{MemoryType: "episodic", Entities: []string{"person:sanju"}, Workspace: "Memd"}, "projects/memd"},
		{PlacementInput{MemoryType: "procedural", Tags: []string{"", "  ", "Deploy Ops"}}, "resources/deploy-ops"},
		{PlacementInput{MemoryType: "precedent", Tags: []string{"law"}}, "resources/law"},
		{PlacementInput{MemoryType: "episodic", Tags: []string{"deploy"}}, InboxDir},
		{PlacementInput{MemoryType: "", Workspace: "!!!"}, InboxDir},
		{PlacementInput{}, InboxDir},
	}
	for _, c := range cases {
		got := Place(c.in)
		if got != c.want {
			t.Errorf("Place(%+v) = %q, want %q", c.in, got, c.want)
		}
		// Total: the result is a directory inside a bucket, usable for a file.
		if !ValidMemoryPath(got + "/x.html") {
			t.Errorf("Place(%+v) = %q is not a bucket directory", c.in, got)
		}
	}
}

func TestEpisodeDate(t *testing.T) {
	d, ok := EpisodeDate("areas/inbox/20240229-leap.html")
	if !ok || !d.Equal(time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("EpisodeDate = %v, %v", d, ok)
	}
	for _, p := range []string{"areas/20230229-x.html", "areas/2024022-x.html", "areas/20240101x.html", "areas/x-20240101-y.html", "20241301-x.html", ""} {
		if _, ok := EpisodeDate(p); ok {
			t.Errorf("EpisodeDate(%q) ok, want none", p)
		}
	}
}

func TestSlug(t *testing.T) {
	cases := map[string]string{
		"person:Sanju Rao":      "person-sanju-rao",
		"service:checkout-api":  "service-checkout-api",
		"  --Hello,  World!-- ": "hello-world",
		"Zoë":                   "zo",
		"":                      "",
		"日本":                    "",
		"A1b2":                  "a1b2",
	}
	for in, want := range cases {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
		if Slug(Slug(in)) != Slug(in) {
			t.Errorf("Slug not idempotent on %q", in)
		}
	}
}

func TestHrefToPath(t *testing.T) {
	ok := map[string]string{
		"/areas/oncall/rollback-order.html": "areas/oncall/rollback-order.html",
		"/areas/x.html#claim":               "areas/x.html",
		"/areas/my%20file.html":             "areas/my file.html",
		"/archive/2024/areas//x.html?v=1":   "archive/2024/areas/x.html",
	}
	for in, want := range ok {
		got, err := HrefToPath(in)
		if err != nil || got != want {
			t.Errorf("HrefToPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := []string{
		"https://example.com/areas/x.html",
		"javascript:alert(1)",
		"//evil.example/areas/x.html",
		"areas/x.html",
		"../areas/x.html",
		"/areas/../../etc/passwd",
		"/areas/%2e%2e/x.html",
		"/%2Fevil.example/x",
		"/areas\\..\\x.html",
		"/areas/%zz.html",
		"",
		"/",
	}
	for _, in := range bad {
		got, err := HrefToPath(in)
		if err == nil {
			t.Errorf("HrefToPath(%q) = %q, want error", in, got)
			continue
		}
		if !errors.Is(err, ErrBadHref) {
			t.Errorf("HrefToPath(%q) error %v does not wrap ErrBadHref", in, err)
		}
		if !strings.Contains(err.Error(), "href") {
			t.Errorf("HrefToPath(%q) error %q does not name the href", in, err)
		}
	}
	for _, p := range []string{"areas/x.html", "areas/100% done?#.html", "areas/a b.html"} {
		h := PathToHref(p)
		if h[0] != '/' {
			t.Errorf("PathToHref(%q) = %q", p, h)
		}
		back, err := HrefToPath(h)
		if err != nil || back != p {
			t.Errorf("HrefToPath(PathToHref(%q)=%q) = %q, %v", p, h, back, err)
		}
	}
	if PathToHref("areas/x.html") != "/areas/x.html" {
		t.Errorf("PathToHref plain = %q", PathToHref("areas/x.html"))
	}
}

// adversarial is the seed's worst case for a regex trailing-slash strip: a long run of
// slashes followed by a non-slash.
func adversarial(n int) string { return strings.Repeat("/", n) + "x" }

func BenchmarkNormalizePath64KSlashes(b *testing.B) {
	s := adversarial(64 << 10)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		NormalizePath(s)
		PathViolation(s)
	}
}

// TestNormalizePathLinear compares 64 KB of slashes against 8 x 8 KB as a ratio: linear
// work gives ~1, the quadratic seed bug ~8. Both sides do the same amount of linear work,
// so on a busy machine they are equally likely to be preempted; they are measured
// alternately and the best of many rounds is kept.
func TestNormalizePathLinear(t *testing.T) {
	inputs := func(n int) []string {
		return []string{adversarial(n), strings.Repeat("/", n), strings.Repeat("a/", n/2) + "/", "areas/" + strings.Repeat("x", n) + ".html"}
	}
	small, large := inputs(8<<10), inputs(64<<10)
	run := func(in []string, times int) time.Duration {
		start := time.Now()
		for i := 0; i < times; i++ {
			for _, s := range in {
				NormalizePath(s)
				PathViolation(s)
				BucketOf(s)
				_, _ = HrefToPath(s)
				_, _, _ = UnarchivePath(s)
			}
		}
		return time.Since(start)
	}
	// GC pauses land on whichever side happens to allocate past the threshold; the
	// garbage here is a few MB, so measure without them.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	bestSmall, bestLarge := time.Duration(1<<62), time.Duration(1<<62)
	for round := 0; round < 40; round++ {
		bestSmall = min(bestSmall, run(small, 8))
		bestLarge = min(bestLarge, run(large, 1))
	}
	ratio := float64(bestLarge) / float64(bestSmall)
	t.Logf("8 x 8KB %v, 64KB %v, ratio %.2f", bestSmall, bestLarge, ratio)
	if ratio > 3 {
		t.Fatalf("64KB took %v, 8 x 8KB took %v: ratio %.1f, want ~1 (linear); quadratic would be ~8", bestLarge, bestSmall, ratio)
	}
}

func FuzzNormalizePath(f *testing.F) {
	for _, s := range []string{
		"", "/", "//a//b//", "areas/x.html", "/areas/inbox/20240101-x.html", "archive/2024/archive/2023/areas/x.html",
		"areas/../x.html", "areas/./x.html", "projects//x.html/", "a\\b", "areas/%2e%2e/x.html", "https://h/x",
		"areas/a?b#c%.html", strings.Repeat("/", 100) + "x", "\xff/areas", "resources/people/Sanju Rao.html",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizePath(s)
		if NormalizePath(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, NormalizePath(n))
		}
		if strings.HasPrefix(n, "/") || strings.HasSuffix(n, "/") || strings.Contains(n, "//") {
			t.Fatalf("NormalizePath(%q) = %q keeps a slash it must drop", s, n)
		}
		v := PathViolation(s)
		if ValidMemoryPath(s) != (v == "") {
			t.Fatalf("ValidMemoryPath and PathViolation disagree on %q", s)
		}
		if v == "" {
			if n != s {
				t.Fatalf("valid path %q is not normal (%q)", s, n)
			}
			if BucketOf(s) == "" {
				t.Fatalf("valid path %q has no bucket", s)
			}
			if back, err := HrefToPath(PathToHref(s)); err != nil || back != s {
				t.Fatalf("href round trip of %q: %q, %v", s, back, err)
			}
			a := ArchivePath(s, 2024)
			if !ValidMemoryPath(a) || !IsArchived(a) {
				t.Fatalf("ArchivePath(%q) = %q not a valid archived path", s, a)
			}
			if orig, y, ok := UnarchivePath(a); !ok || orig != s || y != 2024 {
				t.Fatalf("UnarchivePath(%q) = %q, %d, %v", a, orig, y, ok)
			}
			dir := Place(PlacementInput{Path: s})
			if !strings.HasPrefix(s, dir+"/") {
				t.Fatalf("Place(%q) = %q", s, dir)
			}
		}
		if p, err := HrefToPath(s); err == nil {
			for _, seg := range strings.Split(p, "/") {
				if seg == ".." || seg == "." {
					t.Fatalf("HrefToPath(%q) = %q escapes", s, p)
				}
			}
			if NormalizePath(p) != p || p == "" {
				t.Fatalf("HrefToPath(%q) = %q not normal", s, p)
			}
		}
		sl := Slug(s)
		if Slug(sl) != sl || strings.HasPrefix(sl, "-") || strings.HasSuffix(sl, "-") || strings.Contains(sl, "--") {
			t.Fatalf("Slug(%q) = %q", s, sl)
		}
		for i := 0; i < len(sl); i++ {
			if c := sl[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				t.Fatalf("Slug(%q) = %q has %q", s, sl, c)
			}
		}
		dir := Place(PlacementInput{Path: s, MemoryType: s, Workspace: s, Tags: []string{s}, Entities: []string{s}})
		if !ValidMemoryPath(dir + "/x.html") {
			t.Fatalf("Place not total for %q: %q", s, dir)
		}
	})
}

func TestIsMemoryMD(t *testing.T) {
	for rel, want := range map[string]bool{
		"MEMORY.md": true, "projects/memd/MEMORY.md": true, "a/b/c/MEMORY.md": true,
		"XMEMORY.md": false, "projects/xMEMORY.md": false, "MEMORY.md/x": false, "memory.md": false, "": false,
	} {
		if got := IsMemoryMD(rel); got != want {
			t.Errorf("IsMemoryMD(%q) = %v, want %v", rel, got, want)
		}
	}
}
