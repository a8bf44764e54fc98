// Package gitattr is what `git add` and `git checkout` do to a file's bytes between the
// work tree and a blob: the attributes of a path (gitattributes(5): every `.gitattributes`
// from the root down, `$GIT_DIR/info/attributes`, `core.attributesFile`, the system file,
// git's pattern rules and the `binary` macro), the filter drivers of git config
// (`filter.<d>.clean`/`smudge`/`process`/`required`: commands run with `sh -c` and `%f`,
// or git's long-running filter protocol, version 2, one process per driver per Engine),
// and the line-ending rules (`text`, `text=auto`, `eol`, `crlf`, `core.autocrlf`,
// `core.eol`) as git's convert.c applies them.
//
// An Engine with no rule that can change bytes answers Identity for every path after one
// cached check, so a repo without filters or line-ending rules pays nothing.
package gitattr
