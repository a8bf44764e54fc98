package memorymd

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDetectMemoryMDKind(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Kind
	}{
		{"index file", string(readTestdata(t, "memorymd/index.md")), KindIndex},
		{"fresh index", "# MEMORY\n\nAuto-maintained by memory_writer. One bullet per entry. Do not hand-edit.\n\n", KindIndex},
		{"project in template", string(readTestdata(t, "memorymd/project-good.md")), KindProject},
		{"messy project", string(readTestdata(t, "memorymd/project-messy.md")), KindProject},
		{"one section, any case", "# p\n\n## active warnings\n- x\n", KindProject},
		{"both signs", "## CRITICAL RULES\n- [[a/b.md|b]] · type:t subject:s · d\n", KindUnknown},
		{"other headings only", "# notes\n\n## Ideas\n- one\n", KindUnknown},
		{"empty", "", KindUnknown},
		{"plain text", "hello\n", KindUnknown},
		{"header with a heading", "# MEMORY\n\n## Ideas\n", KindUnknown},
	}
	for _, c := range cases {
		if got := Detect([]byte(c.in)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestInspectProjectMD(t *testing.T) {
	good := InspectProject(readTestdata(t, "memorymd/project-good.md"))
	if !good.InTemplate || good.OutOfOrder || len(good.Missing)+len(good.Extra)+len(good.Duplicated) != 0 || good.Lines != 17 {
		t.Errorf("good: %+v", good)
	}
	messy := InspectProject(readTestdata(t, "memorymd/project-messy.md"))
	want := ProjectReport{
		Lines: 23, Chars: messy.Chars,
		Sections:   []string{"Architecture & Config Facts", "Notes", "critical rules", "Architecture & Config Facts", "Old Stuff"},
		Missing:    []string{"Active Warnings", "Topic Files"},
		Extra:      []string{"Notes", "Old Stuff"},
		Duplicated: []string{"Architecture & Config Facts"},
		OutOfOrder: true,
	}
	if !reflect.DeepEqual(messy, want) {
		t.Errorf("messy:\n got %+v\nwant %+v", messy, want)
	}

	// Caps: lines and characters, soft and hard; characters are UTF-16 units as the writer counts.
	body := func(lines int) []byte {
		var b bytes.Buffer
		b.WriteString("# p\n\n## CRITICAL RULES\n")
		for b.Len() > 0 && strings.Count(b.String(), "\n") < lines {
			b.WriteString("- x\n")
		}
		return b.Bytes()
	}
	for _, c := range []struct {
		lines          int
		soft, overHard bool
	}{{159, false, false}, {160, true, false}, {199, true, false}, {200, true, true}} {
		r := InspectProject(body(c.lines))
		if r.Lines != c.lines || r.OverSoftCap != c.soft || r.OverCap != c.overHard {
			t.Errorf("%d lines: %+v", c.lines, r)
		}
	}
	emoji := strings.Repeat("😀", 21000) // 21000 runes, 42000 UTF-16 units
	if r := InspectProject([]byte(emoji)); r.Chars != 42000 || !r.OverSoftCap || r.OverCap {
		t.Errorf("emoji chars: %d soft=%v hard=%v", r.Chars, r.OverSoftCap, r.OverCap)
	}
	long := "- " + strings.Repeat("é", 598) // 600 characters: not over
	longer := long + "!"
	r := InspectProject([]byte("# p\n" + long + "\n" + longer + "\n  " + longer + "\n"))
	if !reflect.DeepEqual(r.LongBullets, []int{3}) {
		t.Errorf("long bullets %v, want [3]", r.LongBullets)
	}
}

func TestRepairProjectMD(t *testing.T) {
	messy := readTestdata(t, "memorymd/project-messy.md")
	want := readTestdata(t, "memorymd/project-messy.repaired.md")
	got := RepairProject(messy, "memd")
	if !bytes.Equal(got, want) {
		t.Errorf("repair:\n%s\nwant:\n%s", got, want)
	}
	checkRepair(t, messy, got)
	if !InspectProject(got).InTemplate {
		t.Error("repaired file is not in the template")
	}
	good := readTestdata(t, "memorymd/project-good.md")
	if out := RepairProject(good, "memd"); !bytes.Equal(out, good) {
		t.Errorf("a file in the template changed:\n%s", out)
	}
	empty := RepairProject(nil, "memd")
	wantEmpty := "# memd\n\n## CRITICAL RULES\n\n- None yet.\n\n## Architecture & Config Facts\n\n- None yet.\n\n## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- None yet.\n"
	if string(empty) != wantEmpty {
		t.Errorf("empty:\n%q\nwant\n%q", empty, wantEmpty)
	}
	// Sections in the wrong order only: reordered, bodies intact.
	swapped := "# t\n\n## Topic Files\n\n- `history.md`.\n\n## CRITICAL RULES\n\n- rule\n"
	out := string(RepairProject([]byte(swapped), "x"))
	wantSwapped := "# t\n\n## CRITICAL RULES\n\n- rule\n\n## Architecture & Config Facts\n\n- None yet.\n\n## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- `history.md`.\n"
	if out != wantSwapped {
		t.Errorf("swapped:\n%s\nwant\n%s", out, wantSwapped)
	}
}

// checkRepair asserts the repair's promises for one input: the output is in the template;
// every non-blank input line is in the output (as is; a `## X` line as its canonical
// section heading or as `### Unsorted: X`), as many times as in the input; a second repair
// changes nothing.
func checkRepair(t *testing.T, in, out []byte) {
	t.Helper()
	if !InspectProject(out).InTemplate {
		t.Fatalf("output not in the template:\n%q\nfrom\n%q", out, in)
	}
	have := map[string]int{}
	for _, l := range mdLines(out) {
		// The four sections match case-insensitively (docs/FORMATS.md §3B): a file already in the
		// template keeps its own spelling of them.
		if isHeadingLine(l) {
			if c := canonicalSection(headingName(l)); c != "" {
				have["## "+c]++
				continue
			}
		}
		have[l]++
	}
	need := map[string]int{}
	for _, l := range mdLines(in) {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if isHeadingLine(l) {
			name := headingName(l)
			if c := canonicalSection(name); c != "" {
				need["## "+c] = 1
			} else {
				need[unsortedTitle+name]++
			}
			continue
		}
		need[l]++
	}
	for l, n := range need {
		if have[l] < n {
			t.Fatalf("line %q: %d in output, want %d\ninput %q\noutput %q", l, have[l], n, in, out)
		}
	}
	if again := RepairProject(out, "p"); !bytes.Equal(again, out) {
		t.Fatalf("not idempotent:\n%q\n%q", out, again)
	}
}

func FuzzRepairProjectMD(f *testing.F) {
	for _, name := range []string{"project-messy.md", "project-good.md", "index.md"} {
		f.Add(readTestdata(f, "memorymd/"+name), "memd")
	}
	f.Add([]byte("## \n##\n## x\r\n## CRITICAL RULES\r\n\t\n- a\n"), "p")
	f.Add([]byte("#x\n## critical RULES \n## Notes\n\n\n## Notes\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, project string) {
		checkRepair(t, data, RepairProject(data, project))
	})
}

func TestParseIndexMD(t *testing.T) {
	data := readTestdata(t, "memorymd/index.md")
	m := ParseIndex(data)
	if !bytes.Equal(m.Bytes(), data) {
		t.Errorf("unchanged index not byte-identical")
	}
	want := []IndexBullet{
		{"projects/memd/20261101-sync-design.md", "Sync design", "project", "memd", "How memd merges diverged branches"},
		{"areas/oncall/rollback-order.html", "Rollback order", "feedback", "oncall", "Roll back the API before the workers"},
		{"resources/people/sanju.md", "Sanju Rao", "user", "sanju", "Prefers short PR descriptions"},
		{"resources/go/errors.md", "Wrapping", "reference", "go", "Wrap errors with %w · always"},
	}
	if got := m.Bullets(); !reflect.DeepEqual(got, want) {
		t.Errorf("bullets:\n%+v\nwant\n%+v", got, want)
	}
	bad := m.Bad()
	if len(bad) != 1 || !errors.Is(bad[0].Err, ErrBadIndexBullet) || !strings.Contains(bad[0].Err.Error(), "line 8:") ||
		!strings.Contains(bad[0].Err.Error(), "areas/inbox/broken.md") || !strings.Contains(bad[0].Err.Error(), "type:") {
		t.Errorf("bad lines: %+v", bad)
	}
	if m.Lines[0].Bullet != nil || m.Lines[0].Err != nil {
		t.Error("header line parsed as a bullet")
	}
	for _, in := range []string{"", "x", "x\n\n", "- [[a|b]] · type:t subject:s · d"} {
		if got := ParseIndex([]byte(in)).Bytes(); string(got) != in {
			t.Errorf("round trip %q -> %q", in, got)
		}
	}
}

// TestIndexParserAgreesWithPython runs the Python reader's own bullet regex on the same
// lines and checks memd accepts exactly the bullets it accepts, with the same fields.
func TestIndexParserAgreesWithPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	lines := []string{
		"# MEMORY", "",
		"- [[a/b.md|B]] · type:t subject:s · d",
		"- [[a/b.md|B]] · type:t subject:s · ",
		"- [[a/b.md|B]] · type:t subject:s ·",
		"- [[a/b.md|B]] · type:t subject:s ·\r",
		"- [[a/b.md|B]]\u00a0·\u2003type:t\u3000subject:s · d\u00a0",
		"- [[a/b.md|B|C]] · type:t subject:s · d",
		"- [[a/b.md|]] · type:t subject:s · d",
		"- [[ a/b.md | B ]] · type:t subject:s · d",
		"- [[a/b.md|B]] · type:t  subject:s  ·  d · e",
		"- [[a/b.md|B]] · type:t subject:s d",
		"- [[a/b.md|B]]·type:t subject:s · d",
		"- [[a/b.md|B]] · type:t\x1csubject:s · d",
		"- [[a]b.md|B]] · type:t subject:s · d",
		"- [[résumé/ü.md|Ünï]] · type:t subject:ß · ‽",
		"  - [[a/b.md|B]] · type:t subject:s · d",
		"- [[a/b.md|B]] · type: subject:s · d",
	}
	path := filepath.Join(t.TempDir(), "MEMORY.md")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "testdata/memorymd/parse_index.py", path).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	type entry struct {
		Line                                   int
		Path, Name, Type, Subject, Description string
	}
	var pyEntries []entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		pyEntries = append(pyEntries, e)
	}
	var goEntries []entry
	for i, l := range ParseIndex([]byte(strings.Join(lines, "\n") + "\n")).Lines {
		if b := l.Bullet; b != nil {
			goEntries = append(goEntries, entry{i + 1, b.Path, b.Name, b.Type, b.Subject, b.Description})
		}
	}
	if len(pyEntries) < 5 {
		t.Fatalf("python accepted only %d bullets: %s", len(pyEntries), out)
	}
	if !reflect.DeepEqual(goEntries, pyEntries) {
		t.Errorf("memd and the Python reader disagree:\nmemd   %+v\npython %+v", goEntries, pyEntries)
	}
}

func TestIndexBulletValidateAndString(t *testing.T) {
	ok := IndexBullet{Path: "projects/memd/sync.md", Name: "Sync", Type: "project", Subject: "memd", Description: "How it syncs · fast"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	line := ok.String()
	if line != "- [[projects/memd/sync.md|Sync]] · type:project subject:memd · How it syncs · fast" {
		t.Errorf("String = %q", line)
	}
	back, err := ParseIndexBullet(line)
	if err != nil || back != ok {
		t.Errorf("round trip: %+v %v", back, err)
	}
	bad := []struct {
		mut  func(*IndexBullet)
		want string
	}{
		{func(b *IndexBullet) { b.Name = "a]b" }, `name "a]b"`},
		{func(b *IndexBullet) { b.Name = "a|b" }, `name "a|b"`},
		{func(b *IndexBullet) { b.Name = "a\nb" }, `name "a\nb"`},
		{func(b *IndexBullet) { b.Name = " " }, "name is empty"},
		{func(b *IndexBullet) { b.Subject = "two words" }, `subject "two words" contains whitespace`},
		{func(b *IndexBullet) { b.Subject = "a·b" }, `subject "a·b" contains the separator`},
		{func(b *IndexBullet) { b.Subject = "" }, "subject is empty"},
		{func(b *IndexBullet) { b.Type = "" }, "type is empty"},
		{func(b *IndexBullet) { b.Description = "one\ntwo" }, "has a newline"},
		{func(b *IndexBullet) { b.Path = "/projects/x.md" }, `"/projects/x.md" has a leading slash`},
		{func(b *IndexBullet) { b.Path = "projects/../x.md" }, `"projects/../x.md" has a ".." segment`},
		{func(b *IndexBullet) { b.Path = "notes/x.md" }, `"notes/x.md" starts with "notes"`},
		{func(b *IndexBullet) { b.Path = "projects/x|y.md" }, `path "projects/x|y.md" contains`},
		{func(b *IndexBullet) { b.Path = "" }, "path is empty"},
	}
	for _, c := range bad {
		b := ok
		c.mut(&b)
		err := b.Validate()
		if !errors.Is(err, ErrBadIndexBullet) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want it to contain %q", b, err, c.want)
		}
	}
	for _, p := range []string{"areas/inbox/x.html", "resources/people/sanju", "archive/2024/projects/a/b.md"} {
		b := ok
		b.Path = p
		if err := b.Validate(); err != nil {
			t.Errorf("path %q: %v", p, err)
		}
	}
}

func TestIndexRepoint(t *testing.T) {
	data := readTestdata(t, "memorymd/index.md")
	m := ParseIndex(data)
	n := m.Repoint("/areas/oncall/rollback-order.html", "archive/2024/areas/oncall/rollback-order.html")
	if n != 1 {
		t.Fatalf("Repoint = %d", n)
	}
	want := bytes.Replace(data, []byte("[[areas/oncall/rollback-order.html|"), []byte("[[archive/2024/areas/oncall/rollback-order.html|"), 1)
	if got := m.Bytes(); !bytes.Equal(got, want) {
		t.Errorf("repoint changed more than the path:\n%s", got)
	}
	if got := m.Lines[5].Bullet.Path; got != "archive/2024/areas/oncall/rollback-order.html" {
		t.Errorf("bullet path %q", got)
	}
	if m.Repoint("areas/oncall/rollback-order.html", "x") != 0 {
		t.Error("second repoint found the old path")
	}
}

func TestMergeIndexMD(t *testing.T) {
	const header = "# MEMORY\n\nAuto-maintained by memory_writer. One bullet per entry. Do not hand-edit.\n\n"
	b := func(path, desc string) string {
		return IndexBullet{Path: path, Name: filepath.Base(path), Type: "t", Subject: "s", Description: desc}.String() + "\n"
	}
	base := header + b("areas/a.md", "a") + b("areas/b.md", "b") + b("areas/c.md", "c") + b("areas/d.md", "d")
	// ours: changed a, removed c, added e, repointed nothing.
	ours := header + b("areas/a.md", "a ours") + b("areas/b.md", "b") + b("areas/d.md", "d") + b("areas/e.md", "e")
	// theirs: changed a too, archived b (repoint), changed c, removed d, added f and a note line.
	theirs := header + b("areas/a.md", "a theirs") + b("archive/2024/areas/b.md", "b") + b("areas/c.md", "c theirs") +
		b("areas/f.md", "f") + "Note: rebuilt on host2\n"
	got := string(MergeIndex([]byte(base), []byte(ours), []byte(theirs)))
	want := header + b("areas/a.md", "a ours") + b("areas/e.md", "e") +
		b("archive/2024/areas/b.md", "b") + b("areas/c.md", "c theirs") + b("areas/f.md", "f") + "Note: rebuilt on host2\n"
	if got != want {
		t.Errorf("merge:\n%s\nwant:\n%s", got, want)
	}
	// Symmetry of content (not order): merging the other way keeps the same bullet paths.
	other := ParseIndex(MergeIndex([]byte(base), []byte(theirs), []byte(ours)))
	paths := func(m *IndexMD) []string {
		var ps []string
		for _, x := range m.Bullets() {
			ps = append(ps, x.Path)
		}
		return ps
	}
	if fmt.Sprint(len(paths(other))) != fmt.Sprint(len(paths(ParseIndex([]byte(got))))) {
		t.Errorf("other direction: %v", paths(other))
	}
	// No base: a plain union, ours first, each path once, ours wins on the same path.
	u := string(MergeIndex(nil, []byte(header+b("areas/a.md", "1")+b("areas/b.md", "2")), []byte(header+b("areas/b.md", "other")+b("areas/c.md", "3"))))
	if u != header+b("areas/a.md", "1")+b("areas/b.md", "2")+b("areas/c.md", "3") {
		t.Errorf("union:\n%s", u)
	}
	// Ours without a final newline still gets whole lines appended.
	nn := string(MergeIndex(nil, []byte(strings.TrimSuffix(header+b("areas/a.md", "1"), "\n")), []byte(b("areas/c.md", "3"))))
	if nn != header+b("areas/a.md", "1")+b("areas/c.md", "3") {
		t.Errorf("no final newline: %q", nn)
	}
	// A malformed bullet from theirs is kept, never dropped.
	mal := "- [[areas/x.md|x]] broken\n"
	if got := string(MergeIndex([]byte(base), []byte(base), []byte(base+mal))); !strings.HasSuffix(got, mal) {
		t.Errorf("malformed line lost: %s", got)
	}
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
