// Package freeport picks free TCP ports on 127.0.0.1 for the servers that
// tests start (embedded etcd members, ZooKeeper, Consul agents).
//
// It picks them outside the kernel's ephemeral port range
// (/proc/sys/net/ipv4/ip_local_port_range), from which the kernel assigns
// the local port of every outgoing connection and of every listener on
// port 0. A server that a test stops and restarts on the same port could
// otherwise find that port taken by an unrelated connection of another
// process (seen in CI: an etcd member restarted by etcdcluster's tests
// failed with "address already in use" for a minute). Where the range
// cannot be read, or leaves no room, it falls back to port 0.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the smallest port picked: below it lie well-known and
// registered service ports.
const lowest = 10000

// attempts bounds the random picks Ports tries per port.
const attempts = 200

// Ports returns n distinct ports on 127.0.0.1 that were free a moment ago:
// it listens on each and closes the listeners before returning. Another
// process may take one before the caller binds it; callers retry then. It
// is safe for concurrent use.
func Ports(n int) ([]int, error) {
	ranges := outsideEphemeral()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := listen(ranges)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Listen listens on a free port of 127.0.0.1 outside the ephemeral range
// (port 0 where there is none): for a caller that checks more about the
// port before it lets go of it. It is safe for concurrent use.
func Listen() (net.Listener, error) { return listen(outsideEphemeral()) }

// Addrs is Ports as "127.0.0.1:PORT" addresses.
func Addrs(n int) ([]string, error) {
	ports, err := Ports(n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, len(ports))
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}

// portRange is the ports [lo, hi].
type portRange struct{ lo, hi int }

// listen listens on a random free port of ranges (port 0 when ranges is
// empty or no pick was free).
func listen(ranges []portRange) (net.Listener, error) {
	total := 0
	for _, r := range ranges {
		total += r.hi - r.lo + 1
	}
	for i := 0; total > 0 && i < attempts; i++ {
		k := rand.IntN(total)
		port := 0
		for _, r := range ranges {
			if n := r.hi - r.lo + 1; k < n {
				port = r.lo + k
				break
			} else {
				k -= n
			}
		}
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			return l, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("freeport: finding a free port: %w", err)
	}
	return l, nil
}

// outsideEphemeral returns the port ranges from lowest to 65535 that the
// kernel's ephemeral range leaves out, or nil when it cannot be read.
func outsideEphemeral() []portRange {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return nil
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo > hi {
		return nil
	}
	var out []portRange
	if lo-1 >= lowest {
		out = append(out, portRange{lowest, lo - 1})
	}
	if hi+1 <= 65535 {
		out = append(out, portRange{max(hi+1, lowest), 65535})
	}
	return out
}
