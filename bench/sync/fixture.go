package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The fixture: a bare remote at the remote change (main = R), and two
// clones to copy for each run:
//
//	behind    main = S (the seed, nFiles files), origin/main = S
//	diverged  main = L (S + nChanges local files), origin/main = S
//
// S, R and L are written once by one `git fast-import` into gen.git (seconds
// at 100k files, where `git add` + `git commit` of the files took minutes);
// the remote gets S by a --no-local clone (a pack of S's objects only), the
// clones check S out, diverged fetches L from gen.git and resets to it, and
// last gen.git pushes R to the remote's main. So neither clone holds any
// object of R: memd and git both fetch the same 100 blobs and trees.
//
// A fixture directory that has the done marker for the same sizes is reused
// (-base DIR), so repeated runs at 100k pay for the fixture once.

const fixtureDone = "fixture-done"

func fixtureStamp(nFiles, nChanges int) string {
	return fmt.Sprintf("files=%d changes=%d v1\n", nFiles, nChanges)
}

func buildFixture(base string, nFiles, nChanges int) error {
	stamp := fixtureStamp(nFiles, nChanges)
	if b, err := os.ReadFile(filepath.Join(base, fixtureDone)); err == nil {
		if string(b) == stamp {
			return nil
		}
		return fmt.Errorf("%s holds a fixture of other sizes (%s); remove it or pick another -base", base, strings.TrimSpace(string(b)))
	}
	if err := os.RemoveAll(base); err != nil {
		return err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return err
	}
	gen := filepath.Join(base, "gen.git")
	bare := filepath.Join(base, "remote.git")
	if err := git(base, "init", "-q", "--bare", "-b", "main", gen); err != nil {
		return err
	}
	if err := fastImport(gen, nFiles, nChanges); err != nil {
		return err
	}
	if err := git(base, "clone", "-q", "--bare", "--no-local", "--single-branch", "-b", "main", gen, bare); err != nil {
		return err
	}
	behind := filepath.Join(base, "behind")
	diverged := filepath.Join(base, "diverged")
	for _, d := range []string{behind, diverged} {
		if err := git(base, "clone", "-q", bare, d); err != nil {
			return err
		}
	}
	if err := git(diverged, "fetch", "-q", gen, "refs/heads/local"); err != nil {
		return err
	}
	if err := git(diverged, "reset", "-q", "--hard", "FETCH_HEAD"); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(diverged, ".git", "FETCH_HEAD"))
	if err := git(gen, "push", "-q", bare, "refs/heads/remote:refs/heads/main"); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(base, fixtureDone), []byte(stamp), 0o644)
}

func memoryBody(i int, body string) string {
	return fmt.Sprintf("<!doctype html><title>m%d</title><article><p><mark>%s</mark></p></article>\n", i, body)
}

// remoteChanged and localChanged are the files each side changes: the
// remote's in the first half of the files, the local ones in the second.
func remoteChanged(nFiles, i int) int { return i * 7 % (nFiles / 2) }
func localChanged(nFiles, i int) int  { return nFiles/2 + i*7%(nFiles/2) }

func fastImport(gen string, nFiles, nChanges int) error {
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir = gen
	cmd.Env = gitEnv
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	data := func(s string) { fmt.Fprintf(w, "data %d\n%s\n", len(s), s) }
	commit := func(ref, mark, from, msg string, when int) {
		fmt.Fprintf(w, "commit %s\nmark %s\n", ref, mark)
		fmt.Fprintf(w, "author bench <bench@example.invalid> %d +0000\n", when)
		fmt.Fprintf(w, "committer bench <bench@example.invalid> %d +0000\n", when)
		data(msg)
		if from != "" {
			fmt.Fprintf(w, "from %s\n", from)
		}
	}
	inline := func(i int, body string) {
		fmt.Fprintf(w, "M 100644 inline %s\n", memoryPath(i))
		data(memoryBody(i, body))
	}
	const t = 1733011200 // 2024-12-01
	commit("refs/heads/main", ":1", "", "seed", t)
	for i := 0; i < nFiles; i++ {
		inline(i, "seed")
	}
	commit("refs/heads/remote", ":2", ":1", "remote", t+60)
	for i := 0; i < nChanges; i++ {
		inline(remoteChanged(nFiles, i), "remote change")
	}
	commit("refs/heads/local", ":3", ":1", "local", t+120)
	for i := 0; i < nChanges; i++ {
		inline(localChanged(nFiles, i), "local change")
	}
	fmt.Fprintln(w, "done")
	if err := w.Flush(); err != nil {
		return err
	}
	if err := in.Close(); err != nil {
		return err
	}
	return cmd.Wait()
}
