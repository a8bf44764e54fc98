package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memd-dev/memd/metrics/statusline"
)

// HeldReasons are memd_held_files' reason label values (statusline.HeldSecret, HeldSize, HeldHook, HeldFilter, HeldCut),
// every one exported from the start (0 until a file is held).
var HeldReasons = []string{statusline.HeldSecret, statusline.HeldSize, statusline.HeldHook, statusline.HeldFilter, statusline.HeldCut}

// heldMetrics are the series of files memd does not commit (docs/ARCHITECTURE.md §11): how many are held
// now, by reason, and the secret findings seen, by gitleaks rule (never the secret).
type heldMetrics struct {
	files    *prometheus.GaugeVec
	findings *prometheus.CounterVec
}

func newHeldMetrics(reg *prometheus.Registry) heldMetrics {
	h := heldMetrics{
		files: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "memd_held_files",
			Help: "Files memd holds back from commits now, by reason (secret, size, hook, filter, cut)."}, []string{"reason"}),
		findings: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_secret_findings_total",
			Help: "Secrets found in files about to be committed (each finding counted once), by gitleaks rule."}, []string{"rule"}),
	}
	reg.MustRegister(h.files, h.findings)
	for _, r := range HeldReasons {
		h.files.WithLabelValues(r)
	}
	return h
}

// HeldFiles sets how many files are held now for reason.
func (m *Metrics) HeldFiles(reason string, n int) {
	m.held.files.WithLabelValues(reason).Set(float64(n))
}

// SecretFindings counts n new findings of rule.
func (m *Metrics) SecretFindings(rule string, n int) { addN(m.held.findings.WithLabelValues(rule), n) }
