package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClient: requests carry the token and JSON type, a create of an
// object that exists is not an error, other statuses are, and a server
// whose certificate the CA did not sign is refused.
func TestClient(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/exists":
			w.WriteHeader(http.StatusConflict)
		case "/forbidden":
			http.Error(w, "forbidden: no", http.StatusForbidden)
		case "/new":
			if r.Header.Get("Content-Type") != "application/json" {
				http.Error(w, "type", http.StatusBadRequest)
				return
			}
			w.WriteHeader(http.StatusCreated)
		default:
			w.Write([]byte(`{"kind":"Status"}`))
		}
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Client{Server: srv.URL, CAFile: ca, Token: "tok"}
	ctx := context.Background()
	if code, body, err := c.Get(ctx, "/api"); err != nil || code != 200 || body != `{"kind":"Status"}` {
		t.Errorf("Get: %d %q %v", code, body, err)
	}
	if err := c.Create(ctx, "/new", `{}`); err != nil {
		t.Errorf("Create: %v", err)
	}
	if err := c.Create(ctx, "/exists", `{}`); err != nil {
		t.Errorf("Create of an existing object: %v", err)
	}
	if err := c.Create(ctx, "/forbidden", `{}`); err == nil || !strings.Contains(err.Error(), "403 forbidden: no") {
		t.Errorf("Create refused: %v", err)
	}
	other := httptest.NewUnstartedServer(http.NotFoundHandler())
	other.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	other.StartTLS()
	defer other.Close()
	if _, _, err := (&Client{Server: other.URL, CAFile: ca}).Get(ctx, "/"); err == nil {
		t.Error("a server the CA did not sign was trusted")
	}
	if _, _, err := (&Client{Server: srv.URL, CAFile: filepath.Join(t.TempDir(), "none")}).Get(ctx, "/"); err == nil {
		t.Error("no CA file: no error")
	}
}

// selfSigned is a certificate for 127.0.0.1 that no CA of the test signed.
func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
