package consultopo

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestResumeRenewalUnanswered: a Resume whose renewal of the adopted
// session gets no answer (the connection drops) is Unavailable: the term
// may go on, nothing says it ended. The agent's address holds "404", as
// may a session id or the error of any request: an earlier version read
// an error naming "404" as Consul not knowing the session (LockLost).
func TestResumeRenewalUnanswered(t *testing.T) {
	var ln net.Listener
	for port := 40400; port < 40500 && ln == nil; port++ {
		ln, _ = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	}
	require.NotNil(t, ln, "no free port in 40400-40499")
	agentURL, err := url.Parse("http://" + agent.Addr())
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(agentURL)
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/session/renew/") {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close() // no answer
			}
			return
		}
		forward.ServeHTTP(w, r)
	}))
	_ = proxy.Listener.Close()
	proxy.Listener = ln
	proxy.Start()
	t.Cleanup(proxy.Close)

	root := testRoot(t)
	c1 := newTestConn(t, root)
	p1, err := c1.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	_, err = p1.Campaign(t.Context(), []byte("v"))
	require.NoError(t, err)
	info, err := p1.ResumeInfo()
	require.NoError(t, err)

	opts := testOptions()
	opts.Address = strings.TrimPrefix(proxy.URL, "http://")
	c2, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	_, err = c2.ResumeLeaderParticipation(t.Context(), "e", "id1", info)
	require.True(t, topo.IsErrType(err, topo.Unavailable), "Resume whose renewal got no answer: %v", err)
}
