//go:build tools

package memd

import (
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/go-git/go-git/v5"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/robfig/cron/v3"
	_ "golang.org/x/net/html"
	_ "gopkg.in/yaml.v3"
	_ "howett.net/plist"
)
