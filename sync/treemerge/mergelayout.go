package treemerge

// The project-memory layout in a tree merge (docs/ARCHITECTURE.md §4, seed 003): a
// project-kind MEMORY.md and its topic files merge by structure
// (memorymd_merge.go), its derived files take the newer side.

import (
	"fmt"

	"github.com/memd-dev/memd/format/memorymd"
)

// ProjectLayout says whether k is a kind of the project-memory layout, merged by
// MergeProjectLayout.
func (k FileKind) ProjectLayout() bool {
	return k == KindProjectMD || k == KindTopicFile || k == KindNewer
}

// MergeProjectLayout merges one path of the project-memory layout. An
// error (a version that is not UTF-8 text, binary, or over
// MaxStructuredMergeBytes) names the path: the caller keeps a conflict
// copy instead, so nothing is lost. note, when not empty, is worth a log
// line: a merged MEMORY.md over its cap, which is reported and never cut.
func (p Policy) MergeProjectLayout(kind FileKind, name string, base, ours, theirs []byte) (merged []byte, note string, err error) {
	switch kind {
	case KindNewer:
		if p.OursTime.After(p.TheirsTime) {
			return ours, "", nil
		}
		return theirs, "", nil
	case KindTopicFile:
		merged, err = memorymd.MergeTopicFile(base, ours, theirs)
	case KindProjectMD:
		merged, err = memorymd.MergeProject(memorymd.ProjectNameOf(name), base, ours, theirs)
		if err == nil {
			if r := memorymd.InspectProject(merged); r.OverCap {
				note = fmt.Sprintf("merged %s is over the cap: %d lines, %d characters (caps %d / %d); not cut",
					name, r.Lines, r.Chars, memorymd.ProjectMaxLines, memorymd.ProjectMaxChars)
			}
		}
	default:
		return nil, "", fmt.Errorf("merge %s: %s is not a kind of the project-memory layout", name, kind)
	}
	if err != nil {
		return nil, "", fmt.Errorf("merge %s: %w", name, err)
	}
	return merged, note, nil
}
