package sleep

import (
	"fmt"
	"io"
)

// progress writes "sleep <phase>: i/n" on one terminal line, every 1000 steps (the caller
// passes a writer only when stderr is a terminal).
func progress(w io.Writer, phase string, i, n int) {
	if w == nil || n < 1000 || (i%1000 != 0 && i != n) {
		return
	}
	fmt.Fprintf(w, "\rmemd sleep %s: %d/%d", phase, i, n)
}

// progressDone ends the progress line.
func progressDone(w io.Writer, n int) {
	if w == nil || n < 1000 {
		return
	}
	fmt.Fprintln(w)
}
