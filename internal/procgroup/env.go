package procgroup

import "strings"

// BaseEnv names the variables of memd's environment a user's command (a hook, the arc
// summarizer) gets whatever the config says (docs/ARCHITECTURE.md §11): enough to find programs, a home,
// a locale, a time zone and a temp dir, nothing that authenticates memd.
var BaseEnv = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER"}

// TokenVar is memd's push credential's default variable (sync.token_env's default).
const TokenVar = "MEMD_GIT_TOKEN"

// ScrubEnv is the environment of a user's command: from environ, the BaseEnv names and the
// allow names (hooks.env, MEMD_* ones too when named), never TokenVar nor any name in deny
// (the configured sync.token_env), never another MEMD_* variable (the caller adds the
// hook's own after these). A name listed but unset is left unset.
func ScrubEnv(environ, allow, deny []string) []string {
	keep := map[string]bool{}
	for _, n := range BaseEnv {
		keep[n] = true
	}
	named := map[string]bool{}
	for _, n := range allow {
		keep[n], named[n] = true, true
	}
	for _, n := range append([]string{TokenVar}, deny...) {
		delete(keep, n)
	}
	var out []string
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if ok && keep[name] && (named[name] || !strings.HasPrefix(name, "MEMD_")) {
			out = append(out, kv)
		}
	}
	return out
}
