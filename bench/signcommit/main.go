// Command signcommit measures memd's signed commit against `git commit -S` of the same
// change in the same run (target: ≤ 1.0x), for an ssh key (ssh-keygen -Y sign)
// and an OpenPGP key (gpg -bsau), each made for the run in a home of its own whose
// ~/.gitconfig sets commit.gpgsign. Also: memd's commit of the same change unsigned (the
// same repo, commit.gpgsign false), and the signer alone on one commit object (what the
// ssh-keygen or gpg spawn costs per commit). Medians of -reps runs after one warm-up.
//
//	go run ./bench/signcommit -files 1000 -reps 15
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
	"github.com/memd-dev/memd/sync/gitsign"
)

func main() {
	files := flag.Int("files", 1000, "files in the repo")
	reps := flag.Int("reps", 15, "timed repetitions (median reported)")
	flag.Parse()
	home, err := os.MkdirTemp("", "memd-bench-sign-")
	if err != nil {
		must(err)
	}
	defer os.RemoveAll(home)
	gitconfig := filepath.Join(home, ".gitconfig")
	for k, v := range map[string]string{"HOME": home, "GIT_CONFIG_GLOBAL": gitconfig, "GIT_CONFIG_NOSYSTEM": "1",
		"GNUPGHOME": filepath.Join(home, ".gnupg"), "XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
		"GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"} {
		os.Setenv(k, v) // memd (in this process) and every git it runs read the same home
	}
	defer run(home, "gpgconf", "--kill", "gpg-agent")
	must(os.WriteFile(gitconfig, []byte("[gc]\n\tauto = 0\n"), 0o644))
	must(run(home, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(home, "id_ed25519")))
	pub, err := os.ReadFile(filepath.Join(home, "id_ed25519.pub"))
	must(err)
	must(os.WriteFile(filepath.Join(home, "allowed_signers"), append([]byte("bench@example.invalid "), pub...), 0o644))
	must(os.MkdirAll(filepath.Join(home, ".gnupg"), 0o700))
	must(run(home, "gpg", "--batch", "--passphrase", "", "--quick-gen-key", "bench <bench@example.invalid>", "ed25519", "sign", "never"))
	base := filepath.Join(home, "base")
	paths, err := generate(base, *files)
	must(err)
	for _, a := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}, {"repack", "-adq"}} {
		must(run(base, "git", a...))
	}
	fmt.Printf("| signer | memd signed ms | git commit -S ms | ratio | memd unsigned ms | signer alone ms |\n")
	fmt.Printf("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, format := range []struct{ name, config string }{
		{"ssh (ssh-keygen -Y sign)", "[gpg]\n\tformat = ssh\n[gpg \"ssh\"]\n\tallowedSignersFile = " + filepath.Join(home, "allowed_signers") + "\n[user]\n\tsigningkey = " + filepath.Join(home, "id_ed25519") + "\n"},
		{"openpgp (gpg -bsau)", "[gpg]\n\tformat = openpgp\n"},
	} {
		must(os.WriteFile(gitconfig, []byte("[gc]\n\tauto = 0\n[commit]\n\tgpgsign = true\n"+format.config), 0o644))
		r := measure(home, base, paths, *reps)
		fmt.Printf("| %s | %.2f | %.2f | %.2fx | %.2f | %.2f |\n", format.name, ms(r.memd), ms(r.git),
			float64(r.memd)/float64(r.git), ms(r.unsigned), ms(r.signer))
	}
}

type result struct{ memd, git, unsigned, signer time.Duration }

// measure times, in fresh copies of base, memd's signed commit of one changed file, git's
// `git commit -S` of the same change, memd's unsigned one and the signer alone.
func measure(home, base string, paths []string, reps int) result {
	memdDir, gitDir, plainDir := copyOf(home, base, "memd"), copyOf(home, base, "git"), copyOf(home, base, "plain")
	defer func() { os.RemoveAll(memdDir); os.RemoveAll(gitDir); os.RemoveAll(plainDir) }()
	must(run(plainDir, "git", "config", "commit.gpgsign", "false"))
	opts := gitrepo.Options{Author: gitrepo.Author{Name: "bench", Email: "bench@example.invalid"}, Hostname: "bench"}
	signed, err := gitrepo.Open(memdDir, opts)
	must(err)
	defer signed.Close()
	plain, err := gitrepo.Open(plainDir, opts)
	must(err)
	defer plain.Close()
	var cache gitsign.Cache
	s, err := cache.Signer(context.Background(), filepath.Join(memdDir, ".git"), "")
	must(err)
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor bench <bench@example.invalid> 1700000000 +0000\ncommitter bench <bench@example.invalid> 1700000000 +0000\n\nbench\n")
	var m, g, u, sg []time.Duration
	for rep := 0; rep <= reps; rep++ {
		p := paths[(rep*7919)%len(paths)]
		for _, d := range []string{memdDir, gitDir, plainDir} {
			must(appendLine(filepath.Join(d, filepath.FromSlash(p)), rep))
		}
		t := time.Now()
		_, err := signed.CommitPaths([]string{p})
		must(err)
		dm := time.Since(t)
		t = time.Now()
		must(run(gitDir, "git", "commit", "-q", "-S", "-m", fmt.Sprintf("rep %d", rep), "--", p))
		dg := time.Since(t)
		t = time.Now()
		_, err = plain.CommitPaths([]string{p})
		must(err)
		du := time.Since(t)
		t = time.Now()
		_, err = s.SignCommit(context.Background(), payload, "bench <bench@example.invalid>")
		must(err)
		ds := time.Since(t)
		signed.WaitIndexRefresh()
		plain.WaitIndexRefresh()
		if rep == 0 {
			continue // warm-up
		}
		m, g, u, sg = append(m, dm), append(g, dg), append(u, du), append(sg, ds)
	}
	must(run(memdDir, "git", "verify-commit", "HEAD"))
	return result{median(m), median(g), median(u), median(sg)}
}

func copyOf(home, base, name string) string {
	d := filepath.Join(home, name)
	must(run(home, "cp", "-a", base, d))
	must(run(d, "git", "update-index", "-q", "--refresh"))
	return d
}

// generate writes n small memory-like files, ~100 a folder, and returns their paths.
func generate(dir string, n int) ([]string, error) {
	var files []string
	body := strings.Repeat("A remembered fact, with enough words to look like a note. ", 12)
	for i := 0; i < n; i++ {
		rel := fmt.Sprintf("areas/g%03d/memory-%06d.html", i/100, i)
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>%d %s</p>\n", i, body)), 0o644); err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}

func appendLine(p string, rep int) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "<!-- rep %d -->\n", rep)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func run(dir, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), dir, err, out)
	}
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/signcommit:", err)
		os.Exit(1)
	}
}
