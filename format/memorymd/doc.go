// Package memorymd is MEMORY.md in both its kinds (docs/FORMATS.md §3): the index and the
// per-project memory in its template; reading, repairing and merging them (and the project
// layout's topic files). Nothing here ever drops a line.
package memorymd
