package gitrepo

import (
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// newHTTPWorld is a syncWorld whose remote is also served over HTTP; A's
// origin points at the HTTP URL (B keeps the file path).
func newHTTPWorld(t *testing.T, token string, files map[string]string) (*testutil.GitHTTPServer, *syncWorld) {
	t.Helper()
	w := newSyncWorld(t, files)
	testutil.RunGit(t, w.bare, "config", "http.receivepack", "true")
	srv := testutil.NewGitHTTPServer(t, filepath.Dir(w.bare), token)
	if err := w.a.SetRemote("origin", srv.URL(filepath.Base(w.bare))); err != nil {
		t.Fatal(err)
	}
	return srv, w
}

// newTestHTTP serves the bare repos under root over smart HTTP without auth.
func newTestHTTP(t *testing.T, root string) *testutil.GitHTTPServer {
	return testutil.NewGitHTTPServer(t, root, "")
}
