package fastpath

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// A config file is YAML that only the full command can read and validate. So that `memd
// status` with a config file still takes the fast path, the full command remembers what it
// read: after it has loaded and validated a config file whose meaning depends on nothing but
// its bytes and $HOME (no ${VAR}, and a repo that is absolute once ~ is expanded), it writes
// the file's identity (path, size, mtime, inode), $HOME and the repo it resolved to the cache
// file below. The fast path uses the repo only while all of those still match; any edit of
// the config changes its mtime and sends the next run through the full command again.

// configCacheHeader is the cache file's first line; a different one is ignored.
const configCacheHeader = "memd status config cache v1\n"

// ConfigCachePath is where the cache lives: $XDG_CACHE_HOME/memd/status-config, else
// ~/.cache/memd/status-config; "" when neither can be named.
func ConfigCachePath() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" || dir[0] != '/' {
		home := os.Getenv("HOME")
		if home == "" {
			return ""
		}
		dir = home + "/.cache"
	}
	return dir + "/memd/status-config"
}

// configKey is the identity of a config file as the cache records it.
func configKey(path string, fi fs.FileInfo, home string) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return "path " + path + "\nsize " + itoa(uint64(fi.Size())) + "\nmtime " + itoa(uint64(fi.ModTime().UnixNano())) +
		"\ninode " + itoa(uint64(st.Ino)) + "\nhome " + home + "\n"
}

// RememberConfig records that the config file at path (absolute and clean), whose FileInfo
// fi was taken before its bytes were read and validated, resolves to repo. A file modified in
// the two seconds before now is not recorded: a second edit in the same timestamp tick could
// leave its identity unchanged.
func RememberConfig(path string, fi fs.FileInfo, repo string, now time.Time) error {
	if now.Sub(fi.ModTime()) < 2*time.Second {
		return errors.New("config file modified in the last 2s: not remembered yet")
	}
	home := os.Getenv("HOME")
	key := configKey(path, fi, home)
	cache := ConfigCachePath()
	if key == "" || cache == "" || path == "" || path[0] != '/' || !clean(path) || repo == "" || repo[0] != '/' {
		return errors.New("config not rememberable")
	}
	// ~/.cache/memd is the user's, outside the memory repo (no tree reaches it), and this
	// package may import only what os does: plain os calls, not internal/safefs.
	if err := os.MkdirAll(cache[:len(cache)-len("/status-config")], 0o700); err != nil {
		return err
	}
	tmp := cache + ".tmp" + itoa(uint64(os.Getpid()))
	data := configCacheHeader + key + "repo " + repo + "\n"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, cache); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// configRepo finds which config file the full command would read (--config, else
// $MEMD_CONFIG, else $XDG_CONFIG_HOME/memd/config.yaml or ~/.config/memd/config.yaml).
// With none there, found is false and ok true. With one there, ok says whether the cache
// vouches for it and repo is what it resolves to.
func configRepo(flagValue string) (repo string, found, ok bool) {
	path, explicit := flagValue, flagValue != ""
	if !explicit {
		if v := os.Getenv("MEMD_CONFIG"); v != "" {
			path, explicit = v, true
		}
	}
	if !explicit {
		dir := os.Getenv("XDG_CONFIG_HOME")
		if dir == "" {
			home := os.Getenv("HOME")
			if home == "" {
				return "", true, false // the full command reads no file then; let it
			}
			dir = home + "/.config"
		}
		path = dir + "/memd/config.yaml"
	}
	if path[0] != '/' || !clean(path) {
		return "", true, false
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) && !explicit {
		return "", false, true
	}
	if err != nil || !fi.Mode().IsRegular() {
		return "", true, false // a named file that is missing, or unreadable: the full command says so
	}
	repo, ok = vouchedRepo(path, fi)
	return repo, true, ok
}

// Vouched reports whether the cache already vouches for the config file at path as it is
// (fi), so the full command need not read and record it again.
func Vouched(path string, fi fs.FileInfo) bool {
	_, ok := vouchedRepo(path, fi)
	return ok
}

// vouchedRepo is the repo the cache records for the config file at path with this identity.
func vouchedRepo(path string, fi fs.FileInfo) (string, bool) {
	key := configKey(path, fi, os.Getenv("HOME"))
	cache, _, ok := readWithMtime(ConfigCachePath())
	if key == "" || !ok {
		return "", false
	}
	want := configCacheHeader + key + "repo "
	if len(cache) <= len(want)+1 || string(cache[:len(want)]) != want || cache[len(cache)-1] != '\n' {
		return "", false
	}
	repo := string(cache[len(want) : len(cache)-1])
	return repo, repo[0] == '/' && clean(repo)
}

// itoa formats a non-negative integer (strconv would delay this package's init).
func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
