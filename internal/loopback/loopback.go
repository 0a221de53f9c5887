// Package loopback answers whether a Host header names this machine, for the
// servers that must refuse DNS-rebinding requests (the dev server and the
// executor API).
package loopback

import (
	"net"
	"strings"
)

// IsHost reports whether a Host header (host or host:port) is a loopback
// name: localhost, 127.0.0.0/8 or ::1.
func IsHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
