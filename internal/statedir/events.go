package statedir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EventsDir holds events one-shot commands (memd resolve, restore) queue for the running
// daemon's document: one file each, written atomically, so two commands never interleave
// and the daemon takes each exactly once.
const EventsDir = "events.d"

// QueueEvent writes v (an event, as JSON) for the daemon to take, named by now so they are
// taken in order.
func (d *Dir) QueueEvent(now time.Time, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := d.tree.MkdirAll(d.Rel(EventsDir), 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", d.abs, err)
	}
	name := fmt.Sprintf("%s/%020d-%d.json", EventsDir, now.UnixNano(), os.Getpid())
	return d.WriteFile(name, append(b, '\n'), 0o600)
}

// TakeEvents returns the queued events, oldest first, and removes them. A missing queue is
// none; a file that cannot be read is left and named in the error.
func (d *Dir) TakeEvents() ([][]byte, error) {
	ents, err := os.ReadDir(filepath.Join(d.abs, EventsDir))
	if err != nil {
		return nil, nil
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".json") && e.Type().IsRegular() {
			if _, err := strconv.ParseInt(strings.SplitN(n, "-", 2)[0], 10, 64); err == nil {
				names = append(names, n)
			}
		}
	}
	slices.Sort(names)
	var out [][]byte
	for _, n := range names {
		rel := EventsDir + "/" + n
		b, err := d.ReadFile(rel)
		if err != nil {
			return out, fmt.Errorf("queued event %s: %w", filepath.Join(d.abs, rel), err)
		}
		out = append(out, b)
		if err := d.Remove(rel); err != nil {
			return out, err
		}
	}
	return out, nil
}
