package memd

import "testing"

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{
		"100MiB": 100 * MiB, "100 MiB": 100 * MiB, "512kib": 512 * KiB, "2GB": 2e9, "4096": 4096, "1g": GiB, "7B": 7,
	} {
		got, err := ParseByteSize(in)
		if err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1MiB", "1.5GiB", "ten", "99999999999999999999"} {
		if _, err := ParseByteSize(bad); err == nil {
			t.Errorf("ParseByteSize(%q) accepted", bad)
		}
	}
	if s := (100 * MiB).String(); s != "100MiB" {
		t.Errorf("String = %q", s)
	}
}
