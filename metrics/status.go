package metrics

import (
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

// standInDoc is what the page shows before the first publish.
func standInDoc() *statusline.Document {
	return statusline.Effective(nil, time.Time{}, nil)
}
