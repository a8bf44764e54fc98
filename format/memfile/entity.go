package memfile

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// NormalizeEntityName is memhtml's normalizeEntityName (packages/contracts types.ts), what it
// means for two entity names to be the SAME name: NFC, lower case, runs of white space folded
// to one space, trimmed. memhtml's entity resolution folds spellings onto this form and its
// scope predicates match entities case-insensitively, so memd groups arcs by it too.
// (strings.ToLower is Unicode's simple lower-case mapping; JavaScript's toLowerCase differs
// only for a few special casings such as U+0130, which no slug or arc key depends on.)
func NormalizeEntityName(name string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(norm.NFC.String(name)), isJSSpace), " ")
}

// NormalizeEntityRef is memhtml's normalizeEntityRef: a `type:name` reference with both halves
// normalised (padding around the colon gone); a string with no usable colon as a whole.
func NormalizeEntityRef(ref string) string {
	ref = strings.TrimFunc(ref, isJSSpace)
	at := strings.IndexByte(ref, ':')
	if at <= 0 || at == len(ref)-1 {
		return NormalizeEntityName(ref)
	}
	return NormalizeEntityName(ref[:at]) + ":" + NormalizeEntityName(ref[at+1:])
}

// isJSSpace is JavaScript's \s (and String.prototype.trim's set): Unicode White_Space except
// U+0085, plus U+FEFF.
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}
