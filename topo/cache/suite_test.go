package cache_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// readGroups are the conformance groups a read cache answers: file reads,
// directory listings and watches. (Writes pass through and are checked
// with them; locks and elections pass through untouched.)
var readGroups = []string{"File", "Directory", "Watch", "WatchRecursive"}

// wrap opens a Cache of the whole cell over raw, closed with the test.
func wrap(t testing.TB, raw topo.Conn, opts cache.Options) *cache.Cache {
	t.Helper()
	c, err := cache.New(raw, "", opts)
	require.NoError(t, err)
	return c
}

// suiteOptions turns a backend's suite options into ones for Conns that
// are Caches: the fault funcs get the backend's Conn behind the Cache.
func suiteOptions(opts test.Options) test.Options {
	expire := opts.ExpireSession
	opts.ExpireSession = func(t *testing.T, conn topo.Conn) { expire(t, conn.(*cache.Cache).Unwrap()) }
	return opts
}

// runSuite runs the read groups of the conformance suite with every Conn a
// Cache of the whole cell over a Conn that open returns: the watch groups
// with the Caches in Cached mode (local watchers), and every read group in
// Consistent mode. (The file and directory groups read on one Conn what
// another just wrote, which Cached mode promises only to the writer;
// TestCachedReads checks Cached reads.)
func runSuite(t *testing.T, newStore func(t *testing.T) func() topo.Conn, opts test.Options) {
	t.Run("cached", func(t *testing.T) { runGroups(t, cache.Cached, []string{"Watch", "WatchRecursive"}, newStore, opts) })
	t.Run("consistent", func(t *testing.T) { runGroups(t, cache.Consistent, append(readGroups, "Close"), newStore, opts) })
}

func runGroups(t *testing.T, mode cache.Mode, groups []string, newStore func(t *testing.T) func() topo.Conn, opts test.Options) {
	test.RunGroups(t, groups, func(t *testing.T) func() topo.Conn {
		open := newStore(t)
		return func() topo.Conn { return wrap(t, open(), cache.Options{Mode: mode}) }
	}, suiteOptions(opts))
}

func memoryStore(t *testing.T) (*memorytopo.Factory, func() topo.Conn) {
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
	return f, func() topo.Conn {
		c, err := f.NewConn("mem", "/root")
		require.NoError(t, err)
		return c
	}
}

func memoryOptions() test.Options {
	return test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			mc, ok := memorytopo.ConnOf(conn)
			require.True(t, ok)
			mc.ExpireSession()
		},
		Partition:    func(t *testing.T) test.Partitioned { t.Fatal("not used by the read groups"); return test.Partitioned{} },
		SessionBound: time.Second,
		FaultyStore:  func(t *testing.T) test.FaultyStore { t.Fatal("not used by the read groups"); return test.FaultyStore{} },
	}
}

// TestSuiteMemory runs the read groups (and Close) of the conformance suite through
// Caches on memorytopo.
func TestSuiteMemory(t *testing.T) {
	runSuite(t, func(t *testing.T) func() topo.Conn { _, open := memoryStore(t); return open }, memoryOptions())
}
