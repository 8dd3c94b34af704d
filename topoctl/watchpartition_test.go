package topoctl

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// A watch cut off from its store by a partition (the connections stay
// open, nothing crosses) says "reconnecting" on stderr and, once the
// partition heals, prints what changed meanwhile and goes on, on every
// backend: watch FILE and watch -R.
func TestWatchPartition(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ impl, addr, root string }{
		{"etcd2", etcdtest.Start(t), "/p"},
		{"zk2", zktest.Start(t), "/p"},
		{"consul", consultest.Start(t), "p"},
	} {
		for _, recursive := range []bool{false, true} {
			name := c.impl + "/file"
			if recursive {
				name = c.impl + "/recursive"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				px, err := faultproxy.New(c.addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = px.Close() })
				root := c.root + "-" + strings.ReplaceAll(name, "/", "-")
				direct := target{impl: c.impl, addr: c.addr, root: root}
				cut := target{impl: c.impl, addr: px.Addr(), root: root}
				v1 := strings.TrimSpace(direct.ok(t, "put", "d/f", "one"))
				args := []string{"watch", "d/f"}
				if recursive {
					args = []string{"watch", "-R", "d/"}
				}
				w := cut.start(t, args...)
				w.waitOutput(t, "/d/f "+v1+` "one"`+"\n")

				px.Blackhole()
				require.Eventually(t, func() bool { return strings.Contains(w.stderr.String(), "reconnecting") }, 2*time.Minute, 10*time.Millisecond,
					"no reconnecting note; stderr: %s", w.stderr.String())
				v2 := strings.TrimSpace(direct.ok(t, "put", "d/f", "two"))
				px.Heal()
				w.waitOutput(t, "/d/f "+v2+` "two"`+"\n")
				v3 := strings.TrimSpace(direct.ok(t, "put", "d/f", "three"))
				w.waitOutput(t, "/d/f "+v3+` "three"`+"\n")
				require.Equal(t, 0, w.stop(t), w.stderr.String())
			})
		}
		// leader --observe, the same way: a change of leader made during
		// the partition is printed once it heals.
		t.Run(c.impl+"/leader", func(t *testing.T) {
			t.Parallel()
			px, err := faultproxy.New(c.addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = px.Close() })
			root := c.root + "-" + c.impl + "-leader"
			direct := target{impl: c.impl, addr: c.addr, root: root}
			cut := target{impl: c.impl, addr: px.Addr(), root: root}
			a := direct.start(t, "elect", "e", "--id", "alpha")
			a.waitOutput(t, "elected alpha\n")
			obs := cut.start(t, "leader", "--observe", "e")
			obs.waitOutput(t, "alpha\n")

			px.Blackhole()
			require.Eventually(t, func() bool { return strings.Contains(obs.stderr.String(), "reconnecting") }, 2*time.Minute, 10*time.Millisecond,
				"no reconnecting note; stderr: %s", obs.stderr.String())
			require.Equal(t, 0, a.stop(t), a.stderr.String())
			b := direct.start(t, "elect", "e", "--id", "beta")
			b.waitOutput(t, "elected beta\n")
			px.Heal()
			obs.waitOutput(t, "alpha\nbeta\n")
			require.Equal(t, 0, obs.stop(t), obs.stderr.String())
			assert.Equal(t, "alpha\nbeta\n", obs.stdout.String(), "each leader once")
			require.Equal(t, 0, b.stop(t), b.stderr.String())
		})
	}
}
