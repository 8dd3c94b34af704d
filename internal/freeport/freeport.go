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
//
// A port it hands out is reserved for every process of the machine's user
// for holdFor (a file named after it in a shared temporary directory), so
// that two tests, in one test binary or in two running side by side, are
// not given the same port while the first has yet to bind it, or while it
// stands unbound between a server's stop and restart (seen in CI: a
// cluster test's node found another test's etcd at its address).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// lowest is the smallest port picked: below it lie well-known and
// registered service ports.
const lowest = 10000

// attempts bounds the random picks Ports tries per port.
const attempts = 200

// holdFor is how long a port handed out stays reserved: longer than any
// one test's use of it.
const holdFor = 30 * time.Minute

// Ports returns n distinct ports on 127.0.0.1 that were free a moment ago
// and that no caller of this package, in any process of this user, was
// given in the last holdFor (30 minutes): it listens on each and closes
// the listeners before returning. A process not using this package may
// still take one before the caller binds it. It is safe for concurrent
// use.
func Ports(n int) ([]int, error) { return ports(n, reserveDir()) }

// ports is Ports with the reservations in dir.
func ports(n int, dir string) ([]int, error) {
	ranges := outsideEphemeral()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := listen(ranges, dir)
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Listen listens on a free port of 127.0.0.1 outside the ephemeral range
// (port 0 where there is none), reserved as Ports reserves its ports: for
// a caller that checks more about the port before it lets go of it. It is
// safe for concurrent use.
func Listen() (net.Listener, error) { return listen(outsideEphemeral(), reserveDir()) }

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

// listen listens on a random free port of ranges that it could reserve in
// dir (port 0 when ranges is empty or no pick was free).
func listen(ranges []portRange, dir string) (net.Listener, error) {
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
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		if reserve(dir, port) {
			return l, nil
		}
		l.Close()
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

// reserveDir is the directory of the reservations: one per user, in the
// temporary directory every process of the machine shares.
func reserveDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("topokit-freeport-%d", os.Getuid()))
}

// reserve records port as handed out, in dir, and reports whether it was
// free to take: no file for it, or one older than holdFor, which it takes
// over (renaming it away first, so that of two processes finding it stale
// one takes it, and giving back a fresh one renamed by mistake). Where dir cannot be written it reserves nothing and says
// yes: the port was free to bind, which is all that can be known then.
func reserve(dir string, port int) bool {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return true
	}
	name := filepath.Join(dir, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = f.Close()
			return true
		}
		if !os.IsExist(err) {
			return true
		}
		fi, err := os.Stat(name)
		if err != nil || time.Since(fi.ModTime()) < holdFor {
			return false
		}
		stale := fmt.Sprintf("%s.stale-%d-%d", name, os.Getpid(), rand.Uint64())
		if os.Rename(name, stale) != nil {
			return false // another process took it over
		}
		if fi, err := os.Stat(stale); err == nil && time.Since(fi.ModTime()) < holdFor {
			// Another process took it over between the Stat and the
			// Rename: give its reservation back.
			_ = os.Link(stale, name)
			_ = os.Remove(stale)
			return false
		}
		_ = os.Remove(stale)
	}
	return false
}
