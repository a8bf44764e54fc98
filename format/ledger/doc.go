// Package ledger reads and writes memory.jsonl, the ledger (docs/FORMATS.md §4), faithfully:
// a line memd does not change is written back byte for byte. A note's lifecycle is judged
// here too (JudgeNote), once for every consumer.
package ledger
