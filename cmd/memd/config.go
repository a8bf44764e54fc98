package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
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
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

func parseConfig(data []byte, cfg *memd.Config) error {
	expanded := expandEnv(string(data))
	if strings.TrimSpace(expanded) == "" {
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(expanded), &doc); err != nil {
		return fmt.Errorf("%w: %s", memd.ErrBadConfig, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return nil
	}
	return decodeInto(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// decodeInto walks the YAML mapping along the struct's yaml tags, so every error names the
// full key (sync.author.name) and the value that was wrong, and unknown keys are refused.
func decodeInto(n *yaml.Node, v reflect.Value, prefix string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if v.Kind() == reflect.Struct && v.Type() != reflect.TypeOf(memd.Duration(0)) {
		if n.Kind != yaml.MappingNode {
			if n.Tag == "!!null" {
				return nil
			}
			return &memd.ConfigError{Key: keyOr(prefix), Value: nodeText(n), Problem: "must be a mapping of keys"}
		}
		fields := map[string]reflect.Value{}
		for i := 0; i < v.NumField(); i++ {
			tag := strings.Split(v.Type().Field(i).Tag.Get("yaml"), ",")[0]
			if tag != "" && tag != "-" {
				fields[tag] = v.Field(i)
			}
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := prefix + k.Value
			f, ok := fields[k.Value]
			if !ok {
				return &memd.ConfigError{Key: key, Value: nodeText(val), Problem: fmt.Sprintf("unknown key (line %d)", k.Line)}
			}
			if err := decodeInto(val, f, key+"."); err != nil {
				return err
			}
		}
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" && v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64 && v.Type() != reflect.TypeOf(memd.Duration(0)) {
		// yaml.v3 would truncate 1.5 into 1 without a word.
		return &memd.ConfigError{Key: keyOr(prefix), Value: n.Value, Problem: fmt.Sprintf("must be a whole number (line %d)", n.Line)}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		msg := err.Error()
		if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
			msg = te.Errors[0]
		}
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "line ") {
			msg = msg[i+2:]
		}
		return &memd.ConfigError{Key: keyOr(prefix), Value: nodeText(n), Problem: fmt.Sprintf("%s (line %d)", msg, n.Line)}
	}
	return nil
}

func keyOr(prefix string) string {
	if k := strings.TrimSuffix(prefix, "."); k != "" {
		return k
	}
	return "(top level)"
}

// nodeText renders a node's value for an error message.
func nodeText(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	out, err := yaml.Marshal(n)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// envRef is ${NAME} (the documented form) or $$ (a literal dollar). A bare $NAME is left as
// it is, so a dollar in a value (an argument, a name) is never silently replaced.
var envRef = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

func expandEnv(s string) string {
	return envRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		return os.Getenv(m[2 : len(m)-1])
	})
}
