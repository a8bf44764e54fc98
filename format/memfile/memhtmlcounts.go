package memfile

import (
	"strings"

	"github.com/memd-dev/memd"
)

// InboxDepth says whether the memory m at rel counts toward the inbox depths as memhtml's
// doctor counts them (apps/cli doctor.ts inboxDepth, inboxTaskDepth): inbox is every memory
// memhtml indexes under areas/inbox/, the task inbox's included; taskInbox is a task under
// areas/inbox/tasks/. memd's status line and doctor report the same numbers.
func InboxDepth(rel string, m *Memory) (inbox, taskInbox bool) {
	if m == nil || !m.Valid() || !strings.HasPrefix(rel, memd.InboxDir+"/") {
		return false, false
	}
	return true, m.Type == memd.TypeTask && strings.HasPrefix(rel, memd.TaskInboxDir+"/")
}

// UniqueContentKey is the key memhtml's index holds unique (files_content_hash_active): the
// content hash of a valid active memory outside archive/ that is not a task; "" for a file
// the key does not cover. Two files with one key make `memhtml index update` fail.
func UniqueContentKey(rel string, m *Memory) string {
	if m == nil || !m.Valid() || m.ComputedHash == "" || memd.IsArchived(rel) || m.Type == memd.TypeTask {
		return ""
	}
	return m.ComputedHash
}
