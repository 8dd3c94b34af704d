package zk2topo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestListDirLargeNamesOnly: a names-only ListDir of a directory large
// enough for the radix sort (more than sortMin children) lists every file
// and subdirectory sorted, with names that sort next to "locks"; its
// "locks" child only while the directory is locked (before and after, the
// empty locks znode is hidden), and the same names as a full listing.
func TestListDirLargeNamesOnly(t *testing.T) {
	ctx := t.Context()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	var want []string
	for i := range 100 {
		want = append(want, fmt.Sprintf("f%03d", i))
	}
	want = append(want, "lock", "locksmith", "lockt", "l", "m", "-80", "80-", "sub")
	for _, n := range want {
		p := "d/" + n
		if n == "sub" {
			p = "d/sub/g"
		}
		_, err := c.Create(ctx, p, []byte("x"))
		require.NoError(t, err)
	}
	slices.Sort(want)
	names := func(es []topo.DirEntry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.Name
		}
		return out
	}
	check := func(want []string) {
		t.Helper()
		plain, err := c.ListDir(ctx, "d", false)
		require.NoError(t, err)
		require.Equal(t, want, names(plain))
		full, err := c.ListDir(ctx, "d", true)
		require.NoError(t, err)
		require.Equal(t, want, names(full))
	}
	check(want)

	ld, err := c.Lock(ctx, "d", "held")
	require.NoError(t, err)
	withLocks := slices.Clone(want)
	withLocks = append(withLocks, "locks")
	slices.Sort(withLocks)
	check(withLocks)
	require.NoError(t, ld.Unlock(ctx))

	// The locks znode outlives the lock, empty: hidden again.
	raw := openRaw(t)
	exists, _, err := raw.Exists(root + "/d/locks")
	require.NoError(t, err)
	require.True(t, exists, "the empty locks znode stays after Unlock")
	check(want)
}

// openRaw opens a raw client on the test server, closed when t ends.
func openRaw(t *testing.T) *zk.Conn {
	t.Helper()
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(raw.Close)
	return raw
}

// TestSortNamesShort: sortNames orders like slices.Sort the sets of
// short names (at most 8 bytes after their common prefix) whose radix
// keys cannot tie, where it skips sorting the runs of equal keys: names
// of different lengths that are prefixes of one another, with zero bytes
// inside but not at their end, and such names after a long common prefix
// (and, where their differing bits do not all fit, with the runs sorted).
func TestSortNamesShort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var pool sync.Pool
	for _, tc := range []struct {
		prefix string
		maxLen int
	}{{"", 6}, {"", 8}, {"zone1-0000", 8}} {
		for _, n := range []int{64, 200, 1000} {
			seen := map[string]bool{}
			var names []string
			for len(names) < n {
				b := make([]byte, 1+r.IntN(tc.maxLen))
				for j := range b {
					b[j] = "\x00\x01a\xff"[r.IntN(4)]
				}
				if b[len(b)-1] == 0 {
					b[len(b)-1] = 'z'
				}
				s := tc.prefix + string(b)
				if !seen[s] {
					seen[s] = true
					names = append(names, s)
				}
			}
			want := slices.Clone(names)
			slices.Sort(want)
			sortNames(names, &pool)
			require.Equal(t, want, names, "prefix %q, up to %d bytes, %d names", tc.prefix, tc.maxLen, n)
		}
	}
}
