package statusline_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// FuzzParseRender: whatever sits in status.json, Parse either refuses it with ErrBadDocument or
// every format renders it without panicking, one-line formats as one line, and waybar and
// sidebar as valid JSON.
//
//	go test -run '^$' -fuzz FuzzParseRender -fuzztime 60s ./metrics/statusline/
func FuzzParseRender(f *testing.F) {
	for _, facts := range statuslinetest.Fixtures() {
		b, _ := json.Marshal(statusline.Compose(facts))
		f.Add(b)
	}
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"summary":{"text":"a\nb","parts":[{"text":"\u001b[31mx","kind":"bogus"}]},"sections":[{"lines":[{"text":"%{F#fff}"}]}]}`))
	f.Add([]byte(`{"version":1,"state":"error","error":"x|y #[fg=red] <b>"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := statusline.Parse("fuzz", data)
		if err != nil {
			return
		}
		for _, format := range statusline.Formats {
			out, err := statusline.Render(d, format, statuslinetest.Now, func(int) bool { return true })
			if err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			switch format {
			case "i3blocks":
				if strings.Count(out, "\n") != 3 || !strings.HasSuffix(out, "\n") {
					t.Fatalf("i3blocks: %q is not three lines", out)
				}
			case "swiftbar":
				if l := strings.Split(out, "\n"); len(l) < 3 || l[1] != "---" {
					t.Fatalf("swiftbar: %q", out)
				}
			case "waybar", "sidebar", "json":
				if !json.Valid([]byte(out)) {
					t.Fatalf("%s: invalid JSON %q", format, out)
				}
			default:
				if strings.ContainsAny(out, "\n\r") {
					t.Fatalf("%s: %q is not one line", format, out)
				}
			}
		}
	})
}
