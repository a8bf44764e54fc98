package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// genPlan is a generated history: n commits over m memories under areas/dDD/, each commit
// editing one memory, with a rename every 997 commits, an archive move every 1009, a
// delete every 1013 (brought back 50 commits later) and two memories whose last version
// the benchmark restores: one deleted ago commits before the tip, one in the tip itself.
type genPlan struct {
	n, m, ago int
	// Filled by generate: the paths the benchmark asks about.
	logPath, deletedOld, deletedLast string
}

var genStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func memPath(i int) string { return fmt.Sprintf("areas/d%02d/m%04d.html", i%20, i) }

// The memories the benchmark asks about: one edited about every m commits, one deleted
// ago commits before the tip, one deleted in the tip.
const logI, oldI, lastI = 7, 11, 13

func (g *genPlan) paths() {
	g.logPath, g.deletedOld, g.deletedLast = memPath(logI), memPath(oldI), memPath(lastI)
}

// generate writes the history into the new repo dir through git fast-import.
func (g *genPlan) generate(dir string) error {
	if err := sh(dir, gitEnv, "git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	cmd := exec.Command("git", "fast-import", "--quiet", "--done")
	cmd.Dir, cmd.Env = dir, gitEnv
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	g.stream(w)
	fmt.Fprintln(w, "done")
	if err := w.Flush(); err != nil {
		return err
	}
	in.Close()
	return cmd.Wait()
}

// stream is the fast-import stream of the plan.
func (g *genPlan) stream(w io.Writer) {
	names := make([]string, g.m) // current name of memory i ("" deleted)
	for i := range names {
		names[i] = memPath(i)
	}
	g.paths()
	deleted := map[int]int{} // memory -> commit it comes back at
	for c := 0; c < g.n; c++ {
		at := genStart.Add(time.Duration(c) * time.Minute)
		var ops []string
		data := func(p, body string) {
			ops = append(ops, fmt.Sprintf("M 100644 inline %s\ndata %d\n%s", p, len(body), body))
		}
		switch {
		case c == 0:
			for i := range names {
				data(names[i], fmt.Sprintf("<p>memory %d v0</p>\n", i))
			}
		case c == g.n-g.ago:
			ops = append(ops, "D "+names[oldI])
			names[oldI] = ""
		case c == g.n-1:
			ops = append(ops, "D "+names[lastI])
			names[lastI] = ""
		default:
			i := (c * 7919) % g.m
			if i == oldI || i == lastI || i == logI && c%997 == 0 {
				i = (i + 100) % g.m
			}
			for j, back := range deleted {
				if back == c {
					names[j] = memPath(j)
					data(names[j], fmt.Sprintf("<p>memory %d back at %d</p>\n", j, c))
					delete(deleted, j)
				}
			}
			switch p := names[i]; {
			case p == "":
			case c%997 == 0 && p[:6] == "areas/":
				names[i] = p[:len(p)-5] + "-r.html"
				ops = append(ops, fmt.Sprintf("R %s %s", p, names[i]))
			case c%1009 == 0 && p[:6] == "areas/":
				names[i] = fmt.Sprintf("archive/%d/%s", at.Year(), p)
				ops = append(ops, fmt.Sprintf("R %s %s", p, names[i]))
			case c%1013 == 0:
				ops = append(ops, "D "+p)
				names[i] = ""
				deleted[i] = c + 50
			default:
				data(p, fmt.Sprintf("<p>memory %d v%d</p>\n", i, c))
			}
		}
		msg := fmt.Sprintf("memd: commit %d\n\nMemd-Host: gen\n", c)
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter gen <gen@example.invalid> %d +0000\ndata %d\n%s", at.Unix(), len(msg), msg)
		for _, op := range ops {
			fmt.Fprintln(w, op)
		}
		fmt.Fprintln(w)
	}
}
