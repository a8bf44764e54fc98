package gitremote

import (
	"net"
	"net/url"
	"os"
	"strings"
)

// httpProxyFor is the proxy git (through curl) would use for target: http.proxy from the
// config, else https_proxy/HTTPS_PROXY (https) or http_proxy (http), else
// all_proxy/ALL_PROXY; none when no_proxy/NO_PROXY names the host (which applies to a
// configured proxy too, as in curl). Unlike Go's net/http, loopback is not exempt: curl
// sends 127.0.0.1 through the proxy, and so does memd. "" = direct.
func httpProxyFor(target *url.URL, configured string) string {
	p := configured
	if p == "" {
		names := []string{"http_proxy"}
		if target.Scheme == "https" {
			names = []string{"https_proxy", "HTTPS_PROXY"}
		}
		p = firstEnv(append(names, "all_proxy", "ALL_PROXY")...)
	}
	if p == "" || noProxy(target.Hostname(), firstEnv("no_proxy", "NO_PROXY")) {
		return ""
	}
	if !strings.Contains(p, "://") {
		p = "http://" + p // curl's default proxy scheme
	}
	return p
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(os.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// noProxy reports whether host matches a curl no_proxy list: "*", a host name matching
// itself or as a domain suffix (a leading dot optional), an IP address, or a CIDR range.
func noProxy(host, list string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	ip := net.ParseIP(host)
	for _, e := range strings.Split(list, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if e == "*" {
			return true
		}
		if ip != nil {
			if _, n, err := net.ParseCIDR(e); err == nil && n.Contains(ip) {
				return true
			}
			if eip := net.ParseIP(strings.Trim(e, "[]")); eip != nil && eip.Equal(ip) {
				return true
			}
			continue
		}
		e = strings.TrimPrefix(strings.TrimSuffix(e, "."), ".")
		if host == e || strings.HasSuffix(host, "."+e) {
			return true
		}
	}
	return false
}
