package freeport

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortsOutsideEphemeralRange: the ports are distinct, free, and
// outside the kernel's ephemeral range, where outgoing connections take
// their local ports.
func TestPortsOutsideEphemeralRange(t *testing.T) {
	ranges := outsideEphemeral()
	require.NotEmpty(t, ranges, "this machine's ephemeral range leaves no room (or cannot be read)")
	ports, err := Ports(20)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		inside := false
		for _, r := range ranges {
			inside = inside || (p >= r.lo && p <= r.hi)
		}
		require.True(t, inside, "port %d is not outside the ephemeral range (%v)", p, ranges)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err, "port %d is not free", p)
		l.Close()
	}
	addrs, err := Addrs(2)
	require.NoError(t, err)
	require.Len(t, addrs, 2)
}
