package service

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier speaks systemd's sd_notify protocol (READY, RELOADING, STOPPING, STATUS and the
// watchdog). Outside systemd (NOTIFY_SOCKET unset), and on a nil *Notifier, every method
// is a no-op, so callers never branch on how memd was started.
type Notifier struct {
	log     *slog.Logger
	enabled bool

	mu         sync.Mutex
	lastStatus string
	failing    bool // the last send failed; logged once per failure streak
}

// NewNotifier returns a Notifier for the socket in NOTIFY_SOCKET, read now. logger may be
// nil.
func NewNotifier(logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Notifier{log: logger, enabled: os.Getenv("NOTIFY_SOCKET") != ""}
}

// Enabled reports whether a service manager is listening.
func (n *Notifier) Enabled() bool { return n != nil && n.enabled }

// Ready says start-up (or a reload) is complete: READY=1.
func (n *Notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Reloading says the config is being re-read; Ready must follow when it is done. The
// MONOTONIC_USEC field is what Type=notify-reload (systemd ≥ 253) requires; Type=notify
// ignores it, so the unit works either way.
func (n *Notifier) Reloading() {
	n.send(daemon.SdNotifyReloading + "\n" + strings.TrimSuffix(daemon.SdNotifyMonotonicUsec(), "\n"))
}

// Stopping says memd is shutting down: STOPPING=1.
func (n *Notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sets the one-line status `systemctl status` shows. An unchanged text is not sent
// again: status is published on every state change and most repeat.
func (n *Notifier) Status(text string) {
	if !n.Enabled() {
		return
	}
	text = strings.ReplaceAll(text, "\n", " ")
	n.mu.Lock()
	same := text == n.lastStatus
	n.lastStatus = text
	n.mu.Unlock()
	if !same {
		n.send("STATUS=" + text)
	}
}

// RunWatchdog pings WATCHDOG=1 at half the interval systemd asked for (WATCHDOG_USEC, only
// when WATCHDOG_PID is unset or this process) until ctx ends. A ping is sent only while
// alive() is true, so a wedged owner loop is killed and restarted by systemd instead of
// being kept alive by a healthy-looking timer goroutine. Without a watchdog it returns at
// once.
func (n *Notifier) RunWatchdog(ctx context.Context, alive func() bool) {
	if !n.Enabled() {
		return
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("systemd watchdog: ignoring a bad WATCHDOG_USEC", "err", err)
		return
	}
	if interval <= 0 {
		return
	}
	every := interval / 2
	if every <= 0 {
		every = interval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	wasAlive := true
	for {
		ok := alive == nil || alive()
		if ok {
			n.send(daemon.SdNotifyWatchdog)
		}
		if ok != wasAlive {
			if ok {
				n.log.Info("systemd watchdog: alive again, pinging")
			} else {
				n.log.Warn("systemd watchdog: not alive, withholding pings", "watchdog", interval)
			}
			wasAlive = ok
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Notifier) send(state string) {
	if !n.Enabled() {
		return
	}
	_, err := daemon.SdNotify(false, state)
	n.mu.Lock()
	wasFailing := n.failing
	n.failing = err != nil
	n.mu.Unlock()
	// One line per change between working and failing, not one per ping.
	if err != nil && !wasFailing {
		n.log.Warn("sd_notify failed", "state", firstLine(state), "err", err)
	} else if err == nil && wasFailing {
		n.log.Info("sd_notify works again")
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
