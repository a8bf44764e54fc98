// Package memfile is the memhtml memory file (docs/FORMATS.md §2): the one parser of its
// head (Parse, ParseFile, ParseBytes), the byte-preserving head edits, entity names, the
// inbox counts memhtml's doctor makes, and memd's arcs (RenderArc).
package memfile
