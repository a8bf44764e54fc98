package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/memd-dev/memd"
)

// configPath resolves which config file to read: --config, else $MEMD_CONFIG, else
// $XDG_CONFIG_HOME/memd/config.yaml (~/.config/memd/config.yaml). explicit is true when the
// user named the file, which then must exist.
func configPath(flagValue string) (path string, explicit bool) {
	if flagValue != "" {
		return flagValue, true
	}
	if v := os.Getenv("MEMD_CONFIG"); v != "" {
		return v, true
	}
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "memd", "config.yaml"), false
}

// loadConfig reads the YAML file over the defaults. ${VAR} expands from the environment;
// unknown keys and wrong types are errors naming the key (exit 2 for the caller).
func loadConfig(path string, explicit bool) (memd.Config, error) {
	cfg := memd.DefaultConfig()
	if path == "" {
		return cfg, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return cfg, nil
		}
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	if err := parseConfig(data, &cfg); err != nil {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

func parseConfig(data []byte, cfg *memd.Config) error {
	expanded := os.Expand(string(data), func(name string) string {
		if name == "$" { // "$$" stays a literal dollar
			return "$"
		}
		return os.Getenv(name)
	})
	if strings.TrimSpace(expanded) == "" {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(expanded)))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil {
		return fmt.Errorf("%w: %s", memd.ErrBadConfig, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return nil
}
