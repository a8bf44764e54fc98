// Command filters measures a commit through git's filters (sync/gitattr) against git on
// the same data in the same run: one changed file under git-crypt (a clean command per
// file) and one 1 MiB png under git-lfs (the long-running filter-process), memd's
// CommitPaths vs `git add <file> && git commit -q`, median of -reps runs after a warm-up.
//
//	go run ./bench/filters -reps 7
package main

import (
	"crypto/rand"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
)

func main() {
	reps := flag.Int("reps", 7, "timed repetitions per case (median reported)")
	files := flag.Int("files", 200, "other files in the repo (half under the filter)")
	flag.Parse()
	for _, tool := range []string{"git", "git-crypt", "git-lfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			fatal(fmt.Errorf("%s not on PATH: %w", tool, err))
		}
	}
	fmt.Printf("| case | memd ms | git ms | ratio |\n| --- | ---: | ---: | ---: |\n")
	for _, c := range []struct {
		name, attrs, file string
		setup             []string
		size              int
	}{
		{"one file through git-crypt", "secret/** filter=git-crypt diff=git-crypt\n", "secret/m.md", []string{"git-crypt init"}, 2 << 10},
		{"one 1 MiB png through git-lfs", "*.png filter=lfs diff=lfs merge=lfs -text\n", "pics/a.png", []string{"git lfs install --local"}, 1 << 20},
	} {
		m, g := run(c.attrs, c.file, c.setup, c.size, *files, *reps)
		fmt.Printf("| %s | %.2f | %.2f | %.3fx |\n", c.name, ms(m), ms(g), float64(m)/float64(g))
	}
}

// run builds the repo once, copies it for memd and for git, and times one changed file.
func run(attrs, file string, setup []string, size, others, reps int) (memd, git time.Duration) {
	root, err := os.MkdirTemp("", "memd-bench-filters-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(root)
	base := filepath.Join(root, "base")
	must(sh(root, "git init -q -b main base"))
	for _, s := range setup {
		must(sh(base, s))
	}
	must(os.WriteFile(filepath.Join(base, ".gitattributes"), []byte(attrs), 0o644))
	dir := filepath.Dir(file)
	for i := 0; i < others; i++ {
		d := "notes"
		if i%2 == 0 {
			d = dir
		}
		p := filepath.Join(base, d, fmt.Sprintf("f%04d%s", i, filepath.Ext(file)))
		must(os.MkdirAll(filepath.Dir(p), 0o755))
		must(os.WriteFile(p, content(512), 0o644))
	}
	must(sh(base, "git add -A && git commit -q -m initial"))
	memdDir, gitDir := filepath.Join(root, "memd"), filepath.Join(root, "git")
	for _, d := range []string{memdDir, gitDir} {
		must(sh(root, fmt.Sprintf("cp -a base %s", filepath.Base(d))))
	}
	must(sh(gitDir, "git update-index -q --refresh"))
	repo, err := gitrepo.Open(memdDir, gitrepo.Options{Author: gitrepo.Author{Name: "bench", Email: "bench@example.invalid"}, Hostname: "bench"})
	if err != nil {
		fatal(err)
	}
	defer repo.Close()
	var mt, gt []time.Duration
	for rep := 0; rep <= reps; rep++ {
		data := content(size)
		for _, d := range []string{memdDir, gitDir} {
			must(os.MkdirAll(filepath.Join(d, filepath.Dir(file)), 0o755))
			must(os.WriteFile(filepath.Join(d, file), data, 0o644))
		}
		t := time.Now()
		res, err := repo.CommitPaths([]string{file})
		el := time.Since(t)
		if err != nil || len(res.Changes) != 1 {
			fatal(fmt.Errorf("memd commit: %v (%d changes)", err, len(res.Changes)))
		}
		repo.WaitIndexRefresh()
		t = time.Now()
		must(sh(gitDir, fmt.Sprintf("git add %s && git commit -q -m 'rep %d'", file, rep)))
		gel := time.Since(t)
		if rep > 0 {
			mt, gt = append(mt, el), append(gt, gel)
		}
	}
	// Both stored the same blob (git's filter output), and git sees memd's tree clean.
	a, _ := exec.Command("git", "-C", memdDir, "rev-parse", "HEAD:"+file).Output()
	b, _ := exec.Command("git", "-C", gitDir, "rev-parse", "HEAD:"+file).Output()
	if string(a) != string(b) {
		fatal(fmt.Errorf("memd stored %s, git %s", strings.TrimSpace(string(a)), strings.TrimSpace(string(b))))
	}
	if out, _ := exec.Command("git", "-C", memdDir, "status", "--porcelain").Output(); len(out) > 0 {
		fatal(fmt.Errorf("git status after memd's commits: %s", out))
	}
	return median(mt), median(gt)
}

// content is n bytes of text (hex of random bytes: every rep a new blob).
func content(n int) []byte {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return []byte(fmt.Sprintf("%x", b))
}

func sh(dir, cmd string) error {
	c := exec.Command("sh", "-c", cmd)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@example.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@example.invalid")
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v: %s", cmd, err, out)
	}
	return nil
}

func must(err error) {
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/filters:", err)
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
