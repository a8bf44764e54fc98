package repofiles_test

import (
	"testing"

	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
)

// BenchmarkIgnored: one path check as the reconcile walk does it for every file.
func BenchmarkIgnored(b *testing.B) {
	root := newRepo(b)
	testutil.WriteFile(b, root, ".gitignore", "*.log\nbuild/\n/local/\ndocs/**/draft-*.html\ncache\n")
	testutil.WriteFile(b, root, "projects/p/.gitignore", "secret.html\n")
	ig, err := repofiles.New(root, []string{"*.bak"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ig.Ignored("projects/p/tasks/20261130-deploy-checklist.html", false) {
			b.Fatal("ignored")
		}
	}
}
