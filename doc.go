// Package memd is the shared vocabulary of the memory repo: the names every package spells
// the same way (vocab.go: phases, lifecycle modes, PARA buckets, record and memory types,
// default file names, the state dir), the paths (PARA placement, the archive mapping,
// violations, conflict copy names), the one time parser (ParseTime), the mass deletion
// bar, and Config with its defaults and validation.
//
// It imports nothing of the module, so anything may import it. It reads and writes no file:
// the repo's file formats are the packages under format/ (ledger, memfile, memorymd,
// writerlock, scaffold), and the merge policy is sync/treemerge's, beside the merge that
// runs it.
package memd
