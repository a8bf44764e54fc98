package doctor

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// memoryWith is a valid memory whose head differs by title and whose article is body.
func memoryWith(title, typ, body string) string {
	return `<!doctype html>
<html><head><meta charset="utf-8"><title>` + title + `</title>
<meta name="memhtml-type" content="` + typ + `">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-01-02T10:00:00Z">
<meta name="memhtml-updated" content="2026-01-03">
` + extraTask(typ) + `</head><body>` + body + `</body></html>
`
}

func extraTask(typ string) string {
	if typ == "task" {
		return `<meta name="memhtml-task-status" content="todo">` + "\n"
	}
	return ""
}

// Doctor's duplicate rule is memhtml's: two active non-task memories whose articles have one
// content hash (memhtml's canonical text: block edges are spaces, <pre> verbatim, head
// ignored) make the real `memhtml index rebuild` fail; pairs doctor lets through, memhtml
// indexes. One repo of the pairs doctor calls duplicates (each alone breaks the rebuild,
// so one at a time) and one of the near misses.
func TestDuplicatesAgreeWithMemhtml(t *testing.T) {
	mh := testutil.InstallMemhtml(t)
	dups := map[string][2]string{
		"same bytes, other head": {
			`<article><p><mark>The pool holds 64.</mark> Sized in March.</p></article>`,
			`<article><p><mark>The pool holds 64.</mark> Sized in March.</p></article>`},
		"whitespace and block edges": {
			`<article><p><mark>The cache is warm.</mark></p><p>After deploys.</p></article>`,
			"<article>\n  <p><mark>The cache   is warm.</mark> After\n deploys.</p>\n</article>"},
	}
	near := map[string][2]string{
		"pre whitespace": {
			`<article><p><mark>Run this.</mark></p><pre>make  all</pre></article>`,
			`<article><p><mark>Run this.</mark></p><pre>make all</pre></article>`},
		"inline edge": {
			`<article><p><mark>Drain</mark> <em>first</em>.</p></article>`,
			`<article><p><mark>Drain</mark><em>first</em>.</p></article>`},
	}
	for name, pair := range dups {
		root := t.TempDir()
		testutil.WriteFile(t, root, "areas/x/one.html", memoryWith("One", "semantic", pair[0]))
		testutil.WriteFile(t, root, "projects/p/two.html", memoryWith("Two", "procedural", pair[1]))
		testutil.WriteFile(t, root, "archive/2020/areas/x/one.html", memoryWith("Old", "semantic", pair[0])) // archived: no clash
		testutil.WriteFile(t, root, "projects/p/tasks/t1.html", memoryWith("T1", "task", pair[0]))           // tasks: no clash
		rep, err := Check(root, Options{})
		if err != nil {
			t.Fatal(err)
		}
		d := findings(rep, "duplicate")
		if len(d) != 1 || d[0].Path != "areas/x/one.html" || !strings.Contains(d[0].Message, "projects/p/two.html") || d[0].Severity != Problem {
			t.Errorf("%s: duplicate findings %+v", name, d)
		}
		if out, ok := rebuild(t, mh, root); ok || !strings.Contains(out, "content_hash") {
			t.Errorf("%s: memhtml indexed what doctor calls a duplicate (ok %v):\n%s", name, ok, out)
		}
	}
	root := t.TempDir()
	for name, pair := range near {
		testutil.WriteFile(t, root, "areas/near/"+strings.ReplaceAll(name, " ", "-")+"-a.html", memoryWith("A "+name, "semantic", pair[0]))
		testutil.WriteFile(t, root, "areas/near/"+strings.ReplaceAll(name, " ", "-")+"-b.html", memoryWith("B "+name, "semantic", pair[1]))
	}
	rep, err := Check(root, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := findings(rep, "duplicate"); len(d) != 0 || rep.Problems != 0 {
		t.Errorf("near misses: %+v", rep.Findings)
	}
	if out, ok := rebuild(t, mh, root); !ok || !strings.Contains(out, `"filesIndexed": 4`) {
		t.Errorf("memhtml refused what doctor lets through:\n%s", out)
	}
}

// rebuild commits the tree and runs `memhtml index rebuild`; ok is its success.
func rebuild(t *testing.T, mh testutil.Memhtml, root string) (string, bool) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "x"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	out, err := mh.Command(root, "index", "rebuild").CombinedOutput()
	return string(out), err == nil
}
