package agent

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/memd-dev/memd/sync/gitremote"
)

func TestReasonOfIsTheInnermostWords(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	cases := map[error]string{
		fmt.Errorf("fetch origin: %w: %w", gitremote.ErrOffline, dial):     "connection refused",
		fmt.Errorf("fetch: %w", errors.New("ssh: handshake failed:\nEOF")): "EOF",
		errors.New("plain"): "plain",
	}
	for err, want := range cases {
		if got := reasonOf(err); got != want {
			t.Errorf("reasonOf(%q) = %q, want %q", err, got, want)
		}
	}
}
