package memd

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes that reads "100MiB", "512 KiB", "2GB" or a plain number of
// bytes from YAML and JSON.
type ByteSize int64

// Binary and decimal units ByteSize reads.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

var byteUnits = []struct {
	suffix string
	n      ByteSize
}{
	{"kib", KiB}, {"mib", MiB}, {"gib", GiB}, {"tib", GiB << 10},
	{"kb", 1000}, {"mb", 1000 * 1000}, {"gb", 1000 * 1000 * 1000}, {"tb", 1000 * 1000 * 1000 * 1000},
	{"k", KiB}, {"m", MiB}, {"g", GiB}, {"b", 1},
}

// ParseByteSize reads a size: a whole number with an optional unit (B, KiB, MiB, GiB, TiB,
// KB, MB, GB, TB, K, M, G; case-insensitive; a space before the unit allowed).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := ByteSize(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || (n > 0 && ByteSize(n) > (1<<62)/mult) {
		return 0, fmt.Errorf("not a size: %q (use e.g. 100MiB, 512KiB, 2GB or a number of bytes)", s)
	}
	return ByteSize(n) * mult, nil
}

func (b ByteSize) String() string {
	for _, u := range []struct {
		s string
		n ByteSize
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
		if b >= u.n && b%u.n == 0 {
			return strconv.FormatInt(int64(b/u.n), 10) + u.s
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}

// MarshalText writes the shortest exact form (100MiB).
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// UnmarshalText reads what ParseByteSize reads.
func (b *ByteSize) UnmarshalText(t []byte) error {
	v, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = v
	return nil
}
