package topoctl_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topoctl"
)

func TestUIRefusesPlainNonLoopback(t *testing.T) {
	var out bytes.Buffer
	code := topoctl.Main(t.Context(), []string{"-i", "memory", "-a", "ui-refuse", "ui", "--listen", "0.0.0.0:0"}, nil, &out, &out)
	assert.Equal(t, topoctl.ExitUsage, code)
	assert.Contains(t, out.String(), "needs TLS")
}

func TestUIServesUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r, w := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- topoctl.Main(ctx, []string{"-i", "memory", "-a", "ui-serve", "ui", "--listen", "127.0.0.1:0"}, nil, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	_, url, ok := strings.Cut(strings.TrimSpace(line), "open ")
	require.True(t, ok, line)
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
	cancel()
	go func() { _, _ = io.Copy(io.Discard, r) }()
	assert.Equal(t, 0, <-done)
}
