package main

import (
	"fmt"
	"io"

	"github.com/memd-dev/memd/internal/textsafe"
)

// say is fmt.Fprintf for human output: every text argument (strings, errors, Stringers,
// string slices) goes through the one sanitiser first, so a name a remote chose (a conflict
// copy, an invalid memory, a path in an error) cannot drive the user's terminal. The
// format is memd's own and keeps its newlines. --json output never comes here: JSON keeps
// the real names, escaped by the encoder.
func say(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, humanArgs(args)...)
}

func humanArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = textsafe.Escape(v)
		case []string:
			e := make([]string, len(v))
			for j, s := range v {
				e[j] = textsafe.Escape(s)
			}
			out[i] = e
		case error:
			out[i] = textsafe.Escape(v.Error())
		case fmt.Stringer:
			out[i] = textsafe.Escape(v.String())
		default:
			out[i] = a
		}
	}
	return out
}
