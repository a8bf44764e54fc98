package sleep

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	gosync "sync"
	"time"

	"github.com/memd-dev/memd"
)

// The idle record, <state>/sleep-idle.json, makes a night with nothing to do cost one walk.
// When every planned phase comes out empty, the run records a fingerprint of all it planned
// from and the results (counts and report items) it got; a later run whose walk gives the
// same fingerprint, at a clock the plans cannot tell apart from the recorded one, reports
// those results without parsing or planning. The fingerprint covers:
//   - every regular file's path, and the stat (size, mtime, ctime, inode) of every file the
//     planners read: memory files and MEMORY.md files (the walk), and the ledger;
//   - the whole config, HEAD, and the memd executable (a new build may plan differently).
//
// The clock: the plans depend on it only through thresholds (a note's expiry, expiry plus
// the soft grace, a memory's valid-until plus the grace, a done task's age) and through
// now.Year() (archive's keep_years). The record holds the earliest threshold after its
// clock (until) and that year: it holds for a clock in [from, until) with the same year.
//
// A walk in which any of those files was touched within racyWindow of the walk's start
// records nothing: a write within the same timestamp tick could leave its stat unchanged.
//
// Beside the record, <state>/sleep-idle.walk keeps the walk itself and the arc group
// sizes, so a night after a few new memories can be answered by a delta plan (delta.go).
const (
	idleName    = "sleep-idle.json"
	idleVersion = 2
)

type idleRecord struct {
	Version int         `json:"version"`
	Key     string      `json:"key"`
	Base    string      `json:"base"`   // idleInputs.base: what a delta plan must find unchanged
	Ledger  string      `json:"ledger"` // idleInputs.ledgerState
	Saved   int64       `json:"saved"`  // wall clock (unix ns) just before the walk
	From    time.Time   `json:"from"`
	Year    int         `json:"year"` // From.Year() in From's location, as the planners see it
	Until   time.Time   `json:"until,omitzero"`
	Phases  []idlePhase `json:"phases"`
}

type idlePhase struct {
	Name   string         `json:"name"`
	Counts map[string]int `json:"counts,omitempty"`
	Items  []Item         `json:"items,omitempty"`
}

// idleInputs is what a run's fingerprint is made of besides the walk.
type idleInputs struct {
	key      string
	base     string // the key without the walk, the ledger and HEAD
	maxStamp int64  // the latest mtime/ctime among the stat'ed files
	ledger   int64  // the ledger's stamp (0: none)
	// ledgerState is the ledger's path and stat ("... absent" without one): part of the key,
	// not of the base (a delta plan judges a changed ledger itself).
	ledgerState  string
	ledgerExists bool
	ok           bool // false: something could not be stat'ed; never trust or record
}

// idleKey fingerprints the walk, the ledger, the config, HEAD and the executable. The
// base leaves out the walk, the ledger and HEAD: what a delta plan (delta.go) must find
// unchanged.
func idleKey(root string, t *tree, cfg memd.Config) idleInputs {
	in := idleInputs{maxStamp: t.maxStamp, ok: t.complete}
	b := sha256.New()
	fmt.Fprintf(b, "memd sleep idle %d\n", idleVersion)
	ledger := ledgerPath(cfg)
	// The ledger is read with os.ReadFile (through a symlink too): stat it the same way.
	switch st, err := statFollow(filepath.Join(root, filepath.FromSlash(ledger))); {
	case err == nil:
		in.ledgerState = fmt.Sprintf("ledger %q %d %d %d %d\n", ledger, st.Size, st.Mtime, st.Ctime, st.Ino)
		in.maxStamp = max(in.maxStamp, st.stamp())
		in.ledger, in.ledgerExists = st.stamp(), true
	case errors.Is(err, fs.ErrNotExist):
		in.ledgerState = fmt.Sprintf("ledger %q absent\n", ledger)
	default:
		in.ok = false
	}
	c, err := json.Marshal(cfg)
	if err != nil {
		in.ok = false
	}
	b.Write(binary.AppendUvarint(nil, uint64(len(c))))
	b.Write(c)
	fmt.Fprintf(b, "exe %q\n", exeIdentity())
	in.base = hex.EncodeToString(b.Sum(nil))

	h := sha256.New()
	fmt.Fprintf(h, "base %s\n", in.base)
	h.Write([]byte(in.ledgerState))
	fp := t.fingerprint()
	h.Write(fp[:])
	fmt.Fprintf(h, "head %q\n", headState(root))
	in.key = hex.EncodeToString(h.Sum(nil))
	return in
}

// headState is HEAD as files: .git/HEAD, the loose ref it names, else packed-refs' stat.
// Not read by the planners: a cheap guard in the key only. After a commit the record no
// longer answers as is, but the delta plan (which leaves HEAD out) still can.
func headState(root string) string {
	gd := filepath.Join(root, ".git")
	head, err := os.ReadFile(filepath.Join(gd, "HEAD"))
	if err != nil {
		return ""
	}
	out := string(head)
	if ref, ok := strings.CutPrefix(strings.TrimSpace(out), "ref: "); ok && !strings.Contains(ref, "..") {
		if v, err := os.ReadFile(filepath.Join(gd, filepath.FromSlash(ref))); err == nil {
			return out + string(v)
		}
		if st, err := statFollow(filepath.Join(gd, "packed-refs")); err == nil {
			return out + fmt.Sprintf("packed-refs %d %d %d %d", st.Size, st.Mtime, st.Ctime, st.Ino)
		}
	}
	return out
}

// exeIdentity names the running binary by path and stat: a rebuilt memd may plan
// differently, so its records are not trusted.
var exeIdentity = gosync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return "unknown " + time.Now().String() // never matches another process
	}
	st, err := statFollow(exe)
	if err != nil {
		return "unknown " + time.Now().String()
	}
	return fmt.Sprintf("%s %d %d %d %d", exe, st.Size, st.Mtime, st.Ctime, st.Ino)
})

// readIdle returns the record, or nil when there is none usable.
func readIdle(dir string) *idleRecord {
	b, err := os.ReadFile(filepath.Join(dir, idleName))
	if err != nil {
		return nil
	}
	var rec idleRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != idleVersion {
		return nil
	}
	return &rec
}

// holds reports whether rec describes what planning phases now would give.
func (rec *idleRecord) holds(in idleInputs, now time.Time, phases []string) bool {
	if rec == nil || !in.ok || rec.Key != in.key {
		return false
	}
	// The stats match the recorded ones; they prove nothing if the files were touched
	// within the racy window before that walk.
	if in.maxStamp >= rec.Saved-racyWindow {
		return false
	}
	if now.Before(rec.From) || now.Year() != rec.Year || (!rec.Until.IsZero() && !now.Before(rec.Until)) {
		return false
	}
	for _, ph := range phases {
		if rec.phase(ph) == nil {
			return false
		}
	}
	return true
}

func (rec *idleRecord) phase(name string) *idlePhase {
	for i := range rec.Phases {
		if rec.Phases[i].Name == name {
			return &rec.Phases[i]
		}
	}
	return nil
}

// writeIdle records an all-empty run, with its walk and arc group sizes for the delta
// plan; a racy or incomplete walk records nothing (and removes an older record, which no
// longer describes the tree). groups is nil when arcs was not planned.
func writeIdle(dir string, in idleInputs, saved int64, now time.Time, until time.Time, results []PhaseResult, t *tree, groups map[arcKey]int) error {
	if !in.ok || in.maxStamp >= saved-racyWindow {
		return removeIdle(dir)
	}
	rec := idleRecord{Version: idleVersion, Key: in.key, Base: in.base, Ledger: in.ledgerState, Saved: saved, From: now, Year: now.Year(), Until: until}
	for _, pr := range results {
		rec.Phases = append(rec.Phases, idlePhase{Name: pr.Name, Counts: pr.Counts, Items: pr.Items})
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("idle record: %w", err)
	}
	// The walk first: it names the record's key, so a record never pairs with another
	// record's walk.
	if err := writeIdleWalk(dir, in.key, t, groups); err != nil {
		return err
	}
	if err := writeStateCache(dir, idleName, b, 0o600); err != nil {
		return fmt.Errorf("idle record: %w", err)
	}
	return nil
}

func removeIdle(dir string) error {
	if err := removeStateFiles(dir, idleName, idleWalkName); err != nil {
		return fmt.Errorf("idle record: %w", err)
	}
	return nil
}

// replay is the recorded result of phase name, as runPhase would have filled it.
func (rec *idleRecord) replay(name string) PhaseResult { return rec.phase(name).result() }

func (ip *idlePhase) result() PhaseResult {
	pr := PhaseResult{Name: ip.Name, Counts: map[string]int{}}
	for k, v := range ip.Counts {
		pr.Counts[k] = v
	}
	pr.Items = slices.Clone(ip.Items)
	return pr
}
