package gitrepo

// Ledger records for the sync tests of the ledger merge (the rule's own tests, with the
// same records, are sync/treemerge's mergepolicy_test.go).
const (
	recA  = `{"id":"a","type":"note","text":"A","createdAt":"2026-01-01T00:00:00Z"}`
	recB  = `{"id":"b","type":"rule","text":"B","createdAt":"2026-01-01T00:00:00Z"}`
	recA1 = `{"id":"a","type":"note","text":"A ours","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-03-01T00:00:00Z"}`
	recA2 = `{"id":"a","type":"note","text":"A theirs","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-02-01T00:00:00Z"}`
	recD  = `{"id":"d","type":"note","text":"D ours","createdAt":"2026-04-01T00:00:00Z"}`
	recE  = `{"id":"e","type":"note","text":"E theirs","createdAt":"2026-04-01T00:00:00Z"}`
)
