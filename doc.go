// Package memd is the memory repo model: PARA paths and the archive mapping, memhtml memory
// files and arc rendering, the memory.jsonl ledger, both kinds of MEMORY.md, the writer lock,
// and the Config type with its defaults and validation.
//
// It is pure and small on purpose: no git, no watching, no HTTP. Everything else in memd
// (watcher, sync, sleep, metrics, cmd/memd) builds on it; nothing here imports them.
package memd
