package ui_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTwoPagesOnOneHost: two topoctl ui on one host (two ports, say a
// store and the one it is compared with) are open in one browser at
// once. Cookies are not told apart by port (RFC 6265, which browsers and
// net/http/cookiejar follow): opening the second page must not log the
// first one out by replacing its cookie.
func TestTwoPagesOnOneHost(t *testing.T) {
	a, b := newHarness(t, false), newHarness(t, false)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	get := func(u string) int {
		t.Helper()
		resp, err := c.Get(u)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(a.srv.URL(a.ts.URL)))
	require.Equal(t, http.StatusOK, get(a.ts.URL+"/api/info"))
	require.Equal(t, http.StatusOK, get(b.srv.URL(b.ts.URL)))
	require.Equal(t, http.StatusOK, get(b.ts.URL+"/api/info"))
	require.Equal(t, http.StatusOK, get(a.ts.URL+"/api/info"), "opening the second page logged the first one out")
	require.Equal(t, http.StatusOK, get(a.ts.URL+"/"), "opening the second page logged the first one out")
}
