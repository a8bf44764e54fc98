// Package format holds no code: its subpackages are the memory repo's file formats, one
// package each, as docs/FORMATS.md lists them.
//
//   - ledger: memory.jsonl, the ledger (§4), its JSON scanner and a note's lifecycle verdict
//   - memfile: a memhtml memory file (§2): the head parser, head edits and arcs
//   - memorymd: MEMORY.md, both kinds (§3), with their structured merges
//   - writerlock: .memory.lock, the writer lock (§5)
//   - scaffold: the files `memd init` lays down (§1): skeleton folders, .gitignore lines
//
// Each imports the root (github.com/memd-dev/memd) for the shared names and none imports
// git: the merge policy that chooses between them is sync/treemerge's.
package format
