package loopback

import "testing"

func TestIsHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:1313": true, "127.0.0.1": true, "127.1.2.3:80": true, "[::1]:7788": true, "::1": true,
		"evil.example": false, "127.0.0.1.evil.example": false, "localhost.evil.example": false, "10.0.0.1": false, "": false, "[::2]": false,
	} {
		if got := IsHost(host); got != want {
			t.Errorf("IsHost(%q) = %v, want %v", host, got, want)
		}
	}
}
