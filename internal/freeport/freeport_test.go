package freeport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestReservedPortsAreNotHandedOut: a port another caller (another
// process: the reservation directory is what they share) was given is not
// given again while its reservation holds, even when it is free to bind;
// a reservation older than holdFor is taken over.
func TestReservedPortsAreNotHandedOut(t *testing.T) {
	dir := t.TempDir()
	l, err := listen(outsideEphemeral(), dir)
	require.NoError(t, err)
	lo := l.Addr().(*net.TCPAddr).Port
	l.Close()
	// A range of the one port just handed out: free to bind, reserved.
	one := []portRange{{lo, lo}}
	l, err = listen(one, dir)
	require.NoError(t, err)
	require.NotEqual(t, lo, l.Addr().(*net.TCPAddr).Port, "a reserved port was handed out again")
	l.Close()
	require.False(t, reserve(dir, lo))

	// Once stale, the reservation is taken over, and then holds again.
	old := time.Now().Add(-holdFor - time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(dir, strconv.Itoa(lo)), old, old))
	l, err = listen(one, dir)
	require.NoError(t, err)
	require.Equal(t, lo, l.Addr().(*net.TCPAddr).Port, "a stale reservation was not taken over")
	l.Close()
	require.False(t, reserve(dir, lo))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the stale reservation's file was left behind")
}

// TestPortsAcrossProcesses: ports handed out to this process never
// coincide with those another process was given a moment before and has
// not bound yet.
func TestPortsAcrossProcesses(t *testing.T) {
	const n = 1000 // without reservations, about 37 would coincide
	if dir := os.Getenv("FREEPORT_CHILD_DIR"); dir != "" {
		got, err := ports(n, dir)
		require.NoError(t, err)
		for _, p := range got {
			fmt.Println(p)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPortsAcrossProcesses$")
	dir := t.TempDir()
	cmd.Env = append(os.Environ(), "FREEPORT_CHILD_DIR="+dir)
	var out strings.Builder
	cmd.Stdout = &out
	// The other process is done picking, and binds none of its ports:
	// the window between a port handed out and its server binding it.
	require.NoError(t, cmd.Run())
	mine, err := ports(n, dir)
	require.NoError(t, err)
	theirs := map[int]bool{}
	for _, f := range strings.Fields(out.String()) {
		if p, err := strconv.Atoi(f); err == nil {
			theirs[p] = true
		}
	}
	require.Len(t, theirs, n)
	for _, p := range mine {
		require.False(t, theirs[p], "port %d handed out to both processes", p)
	}
}
