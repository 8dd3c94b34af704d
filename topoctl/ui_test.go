package topoctl_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/topoctl"
)

func TestUIRefusesPlainNonLoopback(t *testing.T) {
	var out bytes.Buffer
	code := topoctl.Main(t.Context(), []string{"-i", "memory", "-a", "ui-refuse", "ui", "--listen", "0.0.0.0:0"}, nil, &out, &out)
	assert.Equal(t, topoctl.ExitUsage, code)
	assert.Contains(t, out.String(), "needs TLS")
}

// startUI runs topoctl with args (a ui command) until stop, which
// interrupts it and returns its exit code; url is the URL it printed.
func startUI(t *testing.T, args ...string) (url string, stop func() int) {
	t.Helper()
	return startUIErr(t, io.Discard, args...)
}

// startUIErr is startUI writing topoctl's stderr to stderr (which may be
// read once stop returned).
func startUIErr(t *testing.T, stderr io.Writer, args ...string) (url string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- topoctl.Main(ctx, args, nil, w, stderr)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("topoctl ui printed no URL: %v", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), "open ")
	require.True(t, ok, line)
	return url, func() int {
		cancel()
		go func() { _, _ = io.Copy(io.Discard, r) }()
		return <-done
	}
}

// TestUIWarnsPlainOffLoopback: --insecure off the loopback serves the
// page over plain http with a warning on stderr saying so; on the
// loopback it says nothing. It served with no warning at all.
func TestUIWarnsPlainOffLoopback(t *testing.T) {
	var stderr bytes.Buffer
	url, stop := startUIErr(t, &stderr, "-i", "memory", "-a", "ui-plain", "ui", "--listen", "0.0.0.0:0", "--insecure", "--writable")
	assert.True(t, strings.HasPrefix(url, "http://"), url)
	assert.Equal(t, 0, stop())
	assert.Contains(t, stderr.String(), "warning: --insecure: the page is served over plain http off the loopback")
	assert.Contains(t, stderr.String(), "change and delete")

	stderr.Reset()
	_, stop = startUIErr(t, &stderr, "-i", "memory", "-a", "ui-plain-lo", "ui", "--listen", "127.0.0.1:0", "--insecure")
	assert.Equal(t, 0, stop())
	assert.NotContains(t, stderr.String(), "warning")
}

func TestUIServesUntilInterrupted(t *testing.T) {
	url, stop := startUI(t, "-i", "memory", "-a", "ui-serve", "ui", "--listen", "127.0.0.1:0")
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	resp, err := (&http.Client{Jar: jar}).Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	base, _, _ := strings.Cut(url, "/?token=")
	resp, err = http.Get(base + "/api/info")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token is required")
	assert.Equal(t, 0, stop())
}

// With TLS, ui serves https on a non-loopback address, and the URL it
// prints names this host (not the unspecified address it listens on), so
// that it can be opened from another machine.
func TestUIServesTLSOffLoopback(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	printed, stop := startUI(t, "-i", "memory", "-a", "ui-tls", "ui", "--listen", "0.0.0.0:0",
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server-key.pem"))
	u, err := url.Parse(printed)
	require.NoError(t, err)
	host, err := os.Hostname()
	require.NoError(t, err)
	assert.Equal(t, "https", u.Scheme)
	assert.Equal(t, host, u.Hostname(), "the URL names this host")

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	client := &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	resp, err := client.Get(u.String())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	u.Scheme = "http"
	resp, err = http.Get(u.String())
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain http to the https page is refused")
	assert.Equal(t, 0, stop())
}
