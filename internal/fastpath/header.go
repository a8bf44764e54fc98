package fastpath

import "time"

// header is what the fast path needs of status.json: enough to decide whether the document
// stands (statusline.Effective) without decoding all of it.
type header struct {
	version   int
	pid       int
	updatedAt time.Time
}

// scanHeader reads the top-level version, pid and updated_at of a status document without
// encoding/json (whose imports would delay the fast path's init). It walks the JSON tokens
// keeping the nesting depth, so a key inside a section or a string never counts. Where
// encoding/json would read a key differently (an escaped or non-ASCII key, which it may match
// case-insensitively or unescape) or a value needs more than a plain integer or string, ok is
// false and the full command decodes the document. Keys match ASCII case-insensitively and the
// last one wins, as in encoding/json.
func scanHeader(doc []byte) (h header, ok bool) {
	var seen int
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return h, false
	}
	depth, expectKey := 0, false
	for ; i < len(doc); i++ {
		switch c := doc[i]; c {
		case '{', '[':
			depth++
			expectKey = c == '{' && depth == 1
		case '}', ']':
			depth--
			if depth < 0 {
				return h, false
			}
		case ',':
			expectKey = depth == 1
		case '"':
			end, plain := stringEnd(doc, i)
			if end < 0 {
				return h, false
			}
			if depth != 1 || !expectKey {
				i = end
				continue
			}
			expectKey = false
			if !plain {
				return h, false // an escaped or non-ASCII key may be one of ours to encoding/json
			}
			key := lower(doc[i+1 : end])
			j := skipSpace(doc, end+1)
			if j >= len(doc) || doc[j] != ':' {
				return h, false
			}
			j = skipSpace(doc, j+1)
			var bit int
			switch key {
			case "version", "pid":
				k := j
				for k < len(doc) && (doc[k] == '-' || doc[k] >= '0' && doc[k] <= '9') {
					k++
				}
				n, good := atoi(doc[j:k])
				if !good || k >= len(doc) || !(doc[k] == ',' || doc[k] == '}' || skipSpace(doc, k) > k) {
					return h, false
				}
				if key == "pid" {
					h.pid, bit = n, 2
				} else {
					h.version, bit = n, 1
				}
				i = k - 1
			case "updated_at":
				if j >= len(doc) || doc[j] != '"' {
					return h, false
				}
				e, plain := stringEnd(doc, j)
				if e < 0 || !plain {
					return h, false
				}
				t, err := time.Parse(time.RFC3339Nano, string(doc[j+1:e]))
				if err != nil {
					return h, false
				}
				h.updatedAt, bit = t, 4
				i = e
			default:
				i = end
				continue
			}
			seen |= bit
		}
	}
	return h, seen == 7 && depth == 0
}

// stringEnd returns the index of the quote closing the string that opens at doc[open], and
// whether the string is plain ASCII without escapes; -1 if it does not close.
func stringEnd(doc []byte, open int) (int, bool) {
	plain := true
	for k := open + 1; k < len(doc); k++ {
		switch c := doc[k]; {
		case c == '"':
			return k, plain
		case c == '\\':
			plain = false
			k++
		case c >= 0x80 || c < 0x20:
			plain = false
		}
	}
	return -1, false
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// lower is an ASCII key in lower case.
func lower(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// atoi parses a JSON integer that fits an int.
func atoi(b []byte) (int, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
