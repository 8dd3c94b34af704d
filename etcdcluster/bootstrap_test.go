package etcdcluster

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSymmetricStart starts 2, then 3, empty nodes at the same time with
// the same seeds (every node's client URL, its own included) and the same
// BootstrapExpect: exactly one of them bootstraps, the others join it,
// and the cluster grows to all of them, one cluster ID behind every URL.
// Without BootstrapExpect such nodes would only wait for a cluster.
func TestSymmetricStart(t *testing.T) {
	for _, size := range []int{2, 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			h := newHarness(t)
			var names, seeds []string
			for i := range size {
				name := string(rune('a' + i))
				names = append(names, name)
				seeds = append(seeds, h.prepare(name).cfg.ClientURL)
			}
			for _, name := range names {
				p := h.procs[name]
				p.cfg.Seeds = slices.Clone(seeds)
				p.cfg.BootstrapExpect = size
			}
			for _, name := range names {
				h.procs[name].run()
			}
			// NewClient refuses endpoints of different clusters.
			cli := h.client(names...)
			st := waitVoters(t, cli, bound, names...)
			require.Equal(t, size, st.IdealSize)
			bootstraps := 0
			for _, name := range names {
				bootstraps += h.procs[name].logCount("bootstrapping a new one-member cluster")
			}
			require.Equal(t, 1, bootstraps, "exactly one node bootstrapped")
			sameData(t, cli, bound)
		})
	}
}
