// Package kubeapi is the sandbox's small REST client for its own
// kube-apiserver: the few reads and creates that starting and probing the
// sandbox need (a default ServiceAccount, a ConfigMap, a binding), over TLS
// that trusts only the sandbox's CA, with a bearer token, never through a
// proxy. client-go is kept for the executor; the sandbox's own servers need
// no more than this.
package kubeapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Client reaches one apiserver as one user.
type Client struct {
	Server string // https://127.0.0.1:PORT
	CAFile string // PEM of the CA that signed the serving certificate
	Token  string // bearer token ("" for none)
	// Timeout bounds each request (default 3 s).
	Timeout time.Duration
}

// MaxBody bounds what a response may bring (whole objects, a ConfigMap the
// Cilium operator reads).
const MaxBody = 4 << 20

// HTTPClient is an http.Client that trusts only the CA of c.CAFile.
func (c *Client) HTTPClient(timeout time.Duration) (*http.Client, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", c.CAFile)
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			Proxy:             nil, // loopback only, never through a proxy
			DisableKeepAlives: true,
		},
	}, nil
}

// Get GETs path and returns the status and body.
func (c *Client) Get(ctx context.Context, path string) (int, string, error) {
	return c.Do(ctx, http.MethodGet, path, "")
}

// Create POSTs the JSON object body to the collection at path; an object
// that already exists is left as it is.
func (c *Client) Create(ctx context.Context, path, body string) error {
	code, out, err := c.Do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if code != http.StatusCreated && code != http.StatusOK && code != http.StatusConflict {
		return fmt.Errorf("POST %s: %d %s", path, code, strings.TrimSpace(out))
	}
	return nil
}

// Do sends one request (body is JSON, "" for none) and returns the status
// and at most MaxBody of the body.
func (c *Client) Do(ctx context.Context, method, path, body string) (int, string, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 3 * time.Second
	}
	hc, err := c.HTTPClient(timeout)
	if err != nil {
		return 0, "", err
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, rd)
	if err != nil {
		return 0, "", err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, string(b), nil
}
