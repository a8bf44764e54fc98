package sync

// indexState tracks the coalesced .git/index refresher.
type indexState struct{}
