package faultproxy_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/test/faultproxy"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, within time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(within))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestBlackholeHoldsTrafficUntilHeal(t *testing.T) {
	p, err := faultproxy.New(echoServer(t))
	require.NoError(t, err)
	defer p.Close()

	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	got, err := roundTrip(c, r, "one", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "one\n", got)

	p.Blackhole()
	require.True(t, p.Blackholed())
	_, err = roundTrip(c, r, "two", 200*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "a blackholed connection must stay silent, got %v", err)

	// A new connection is accepted but carries nothing either.
	c2, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c2.Close()
	r2 := bufio.NewReader(c2)
	_, err = roundTrip(c2, r2, "x", 200*time.Millisecond)
	require.ErrorAs(t, err, &ne)

	p.Heal()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err = r.ReadString('\n') // the held "two" arrives
	require.NoError(t, err)
	require.Equal(t, "two\n", got)
	got, err = roundTrip(c, r, "three", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "three\n", got)
}

func TestResetAndClose(t *testing.T) {
	p, err := faultproxy.New(echoServer(t))
	require.NoError(t, err)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	r := bufio.NewReader(c)
	_, err = roundTrip(c, r, "a", 5*time.Second)
	require.NoError(t, err)
	p.Reset()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = r.ReadString('\n')
	require.Error(t, err, "Reset must drop the connection")
	c.Close()

	p.SetDelay(time.Millisecond)
	c, err = net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	r = bufio.NewReader(c)
	got, err := roundTrip(c, r, "b", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "b\n", got)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = r.ReadString('\n')
	require.Error(t, err)
}
