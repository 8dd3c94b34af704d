package topoctl

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A localhost that resolves off the loopback (a hosts file pointing it
// elsewhere), or not at all, is not taken for the loopback by serve's
// refusal to listen off it without TLS; loopback IPs need no lookup.
func TestIsLoopbackResolvesLocalhost(t *testing.T) {
	t.Parallel()
	to := func(addrs ...string) func(context.Context, string) ([]net.IPAddr, error) {
		return func(context.Context, string) ([]net.IPAddr, error) {
			var out []net.IPAddr
			for _, a := range addrs {
				out = append(out, net.IPAddr{IP: net.ParseIP(a)})
			}
			return out, nil
		}
	}
	failing := func(context.Context, string) ([]net.IPAddr, error) { return nil, errors.New("no such host") }
	assert.True(t, isLoopbackVia("localhost", to("127.0.0.1", "::1")))
	assert.True(t, isLoopbackVia("LocalHost", to("127.0.0.1")))
	assert.False(t, isLoopbackVia("localhost", to("10.0.0.1")), "localhost resolving elsewhere")
	assert.False(t, isLoopbackVia("localhost", to("127.0.0.1", "10.0.0.1")), "localhost resolving partly elsewhere")
	assert.False(t, isLoopbackVia("localhost", failing), "localhost not resolving")
	assert.False(t, isLoopbackVia("localhost", to()), "localhost resolving to nothing")
	assert.True(t, isLoopbackVia("127.0.0.1", failing))
	assert.True(t, isLoopbackVia("::1", failing))
	assert.False(t, isLoopbackVia("0.0.0.0", failing))
	assert.False(t, isLoopbackVia("", failing))
	assert.True(t, isLoopback("localhost"), "this machine's localhost")
}
