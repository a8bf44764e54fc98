package gitrepair

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/memd-dev/memd/sync/gitstore"
)

// errBad marks a file whose content is not what git would have written.
var errBad = errors.New("corrupt")

// isHex40 reports whether s is a full object id.
func isHex40(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// checkLoose reads the loose object file p whose id is oid: empty, not zlib, a bad header,
// truncated or a wrong hash is errBad. Deep off reads only the header; deep reads all of it
// and checks the id.
func checkLoose(p, oid string, deep bool) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() == 0 {
		return fmt.Errorf("empty: %w", errBad)
	}
	zr, err := zlib.NewReader(f)
	if err != nil {
		return fmt.Errorf("not zlib: %w", errBad)
	}
	defer zr.Close()
	h := sha1.New()
	var head [64]byte
	n, err := io.ReadFull(zr, head[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("header: %w", errBad)
	}
	nul := bytes.IndexByte(head[:n], 0)
	if nul < 0 {
		return fmt.Errorf("header: %w", errBad)
	}
	typ, size, ok := bytes.Cut(head[:nul], []byte{' '})
	want, perr := strconv.ParseInt(string(size), 10, 64)
	switch string(typ) {
	case "blob", "tree", "commit", "tag":
	default:
		ok = false
	}
	if !ok || perr != nil || want < 0 {
		return fmt.Errorf("header: %w", errBad)
	}
	if !deep {
		return nil
	}
	h.Write(head[:n])
	got, err := io.Copy(h, zr)
	if err != nil {
		return fmt.Errorf("truncated: %w", errBad)
	}
	if got+int64(n-nul-1) != want {
		return fmt.Errorf("size %d, header says %d: %w", got+int64(n-nul-1), want, errBad)
	}
	if hex.EncodeToString(h.Sum(nil)) != oid {
		return fmt.Errorf("hash mismatch: %w", errBad)
	}
	return nil
}

// checkTrailer reads file p and checks its last 20 bytes are the SHA-1 of what comes before
// (a pack, an idx, the index). An all-zero trailer is git's index.skipHash: accepted.
func checkTrailer(p string, minSize int64) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) < minSize || len(data) < 20 {
		return nil, fmt.Errorf("%d bytes: %w", len(data), errBad)
	}
	return data, checkSum(data)
}

// checkSum checks that data's last 20 bytes are the SHA-1 of the rest (all zero: skipHash).
func checkSum(data []byte) error {
	body, sum := data[:len(data)-20], data[len(data)-20:]
	if bytes.Equal(sum, make([]byte, 20)) {
		return nil
	}
	if got := sha1.Sum(body); !bytes.Equal(got[:], sum) {
		return fmt.Errorf("checksum mismatch: %w", errBad)
	}
	return nil
}

// checkPack checks a pack and its idx and returns the idx, mapped: the idx's header, fan-out
// and size as memd's reads check them (gitstore.OpenPackIndex), the pack's header, and that
// its trailer is the checksum the idx records. Deep also hashes both whole; the shallow look
// at every open does not, as an idx grows with the history (28 MB for 200,000 commits, whose
// reading and hashing were most of a `memd restore` that had nothing to heal: issue 48).
func checkPack(packPath, idxPath string, deep bool) (*gitstore.PackIndex, error) {
	idx, err := gitstore.OpenPackIndex(idxPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, errBad)
	}
	if deep {
		if err := checkFileSum(idxPath); err != nil {
			return nil, fmt.Errorf("%s: %w", idxPath, err)
		}
	}
	want := idx.PackChecksum()
	f, err := os.Open(packPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() < 32 {
		return nil, fmt.Errorf("%s: %d bytes: %w", packPath, st.Size(), errBad)
	}
	var hdr [4]byte
	var tail [20]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil || string(hdr[:]) != "PACK" {
		return nil, fmt.Errorf("%s: header: %w", packPath, errBad)
	}
	if _, err := f.ReadAt(tail[:], st.Size()-20); err != nil || !bytes.Equal(tail[:], want[:]) {
		return nil, fmt.Errorf("%s: truncated or not the pack its idx names: %w", packPath, errBad)
	}
	if !deep {
		return idx, nil
	}
	h := sha1.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size()-20)); err != nil {
		return nil, fmt.Errorf("%s: %w", packPath, err)
	}
	if !bytes.Equal(h.Sum(nil), want[:]) {
		return nil, fmt.Errorf("%s: checksum mismatch: %w", packPath, errBad)
	}
	return idx, nil
}

// checkFileSum checks that file p's last 20 bytes are the SHA-1 of the rest, read in pieces.
func checkFileSum(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < 20 {
		return fmt.Errorf("%d bytes: %w", st.Size(), errBad)
	}
	h := sha1.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size()-20)); err != nil {
		return err
	}
	var sum [20]byte
	if _, err := f.ReadAt(sum[:], st.Size()-20); err != nil {
		return err
	}
	if !bytes.Equal(h.Sum(nil), sum[:]) {
		return fmt.Errorf("checksum mismatch: %w", errBad)
	}
	return nil
}

// checkIndex checks the index file: its signature, version and checksum.
func checkIndex(p string) error {
	data, err := checkTrailer(p, 12+20)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(data, []byte("DIRC")) {
		return fmt.Errorf("signature: %w", errBad)
	}
	return nil
}
