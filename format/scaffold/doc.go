// Package scaffold is the repo's first files (docs/FORMATS.md §1): the skeleton folders, the
// .gitignore lines memd needs, and the project-memory layout `memd init` lays down. It
// creates only what is missing and never writes through a symlink.
package scaffold
