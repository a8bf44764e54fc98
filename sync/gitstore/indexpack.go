package gitstore

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// streamAbove is core.bigFileThreshold for the fetched packs memd indexes: a blob larger is
// hashed as it streams past and never held (git's default is 512 MiB; a memory file is
// kilobytes, so anything over a few MiB is a stranger that sync.max_file_size may refuse).
const streamAbove = 16 << 20

var gitPath = sync.OnceValue(func() string {
	p, _ := exec.LookPath("git")
	return p
})

// gitBinary is the git that indexes fetched packs ("" = none: go-git's writer). A variable
// so tests can take git away.
var gitBinary = gitPath

// indexPackWriter pipes a fetched pack into `git index-pack --stdin --fix-thin`, which
// writes the pack, its index and reverse index into objects/pack. Close waits for it.
func (s *Storage) indexPackWriter(git string) (io.WriteCloser, error) {
	cmd := exec.Command(git, "--git-dir", s.gitDir,
		"-c", fmt.Sprintf("core.bigFileThreshold=%d", streamAbove), "-c", "pack.writeReverseIndex=true",
		"index-pack", "--stdin", "--fix-thin")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	w := &indexPackWriter{s: s, cmd: cmd}
	cmd.Stdout, cmd.Stderr = io.Discard, &w.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("index fetched pack: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("index fetched pack: start %s: %w", git, err)
	}
	w.in = in
	return w, nil
}

type indexPackWriter struct {
	s      *Storage
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr bytes.Buffer
	n      int64
}

func (w *indexPackWriter) Write(p []byte) (int, error) {
	n, err := w.in.Write(p)
	w.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("index fetched pack: %w", err)
	}
	return n, nil
}

// Close ends the pack and waits for the index. An empty write (nothing fetched) is no pack.
func (w *indexPackWriter) Close() error {
	_ = w.in.Close()
	err := w.cmd.Wait()
	w.s.Reindex()
	if err != nil && w.n > 0 {
		return fmt.Errorf("index fetched pack (%d bytes): %w: %s", w.n, err, strings.TrimSpace(w.stderr.String()))
	}
	return nil
}
