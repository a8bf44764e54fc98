// Package configs holds the files memd ships besides its binary: the example config, the
// systemd unit and launchd plist templates (rendered by the service package), and the
// observability snippets.
package configs

import _ "embed"

// SystemdUnit is the text/template of the systemd user unit (service.RenderSystemd).
//
//go:embed memd.service.tmpl
var SystemdUnit string

// LaunchdPlist is the text/template of the launchd agent plist (service.RenderLaunchd).
//
//go:embed memd.plist.tmpl
var LaunchdPlist string

// ExampleConfig is a commented config file holding every key at its default.
//
//go:embed config.example.yaml
var ExampleConfig string
