// Package writerlock is the writer lock, <repo>/.memory.lock (docs/FORMATS.md §5): the
// file every writer of the memory repo serialises on, shared with the Python memory writer.
package writerlock
