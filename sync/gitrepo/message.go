package gitrepo

import (
	"fmt"
	"strings"

	"github.com/memd-dev/memd"
)

// MaxListedPaths is how many changed paths a change commit message lists.
const MaxListedPaths = 20

// TrailerHost is the trailer naming the machine that made a commit.
const TrailerHost = "Memd-Host"

// ChangeMessage builds memd's change commit message (docs/ARCHITECTURE.md §3):
//
//	memd: +A ~M -D
//
//	A path
//	M path
//	… and N more
//
//	Memd-Host: <host>
//
// changes are listed in the given order (memd.CommitResult.Changes is sorted).
func ChangeMessage(changes []memd.Change, host string) string {
	var a, m, d int
	for _, c := range changes {
		switch c.Op {
		case 'A':
			a++
		case 'M':
			m++
		case 'D':
			d++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "memd: +%d ~%d -%d\n\n", a, m, d)
	for i, c := range changes {
		if i == MaxListedPaths {
			fmt.Fprintf(&b, "… and %d more\n", len(changes)-MaxListedPaths)
			break
		}
		// A newline in a file name would break the one-path-a-line
		// format; show it escaped.
		p := strings.ReplaceAll(c.Path, "\n", `\n`)
		fmt.Fprintf(&b, "%c %s\n", c.Op, p)
	}
	if len(changes) > 0 {
		b.WriteByte('\n')
	}
	host = strings.ReplaceAll(host, "\n", " ")
	fmt.Fprintf(&b, "%s: %s\n", TrailerHost, host)
	return b.String()
}
