package etcd2topo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestWatchOfFileRecreatedAcrossCompaction: a Watch whose file is deleted
// and re-created while its Conn is cut off, the deletion compacted away
// before the watch can resume, ends with NoNode, as it does when it sees
// the deletion (and as on ZooKeeper and Consul, which tell a re-created
// file by its creation's zxid or index): the re-read after the compaction
// finds another file, not a change of the watched one.
func TestWatchOfFileRecreatedAcrossCompaction(t *testing.T) {
	var ch <-chan *topo.WatchData
	recreateWhileCut(t, "f", func(w topo.Conn) {
		var err error
		_, ch, err = w.Watch(context.Background(), "f")
		require.NoError(t, err)
	})

	var got []*topo.WatchData
	seen := func() (out []string) {
		for _, wd := range got {
			out = append(out, fmt.Sprintf("%q %v", wd.Contents, wd.Err))
		}
		return out
	}
	timeout := time.After(40 * time.Second)
	for done := false; !done; {
		select {
		case wd, ok := <-ch:
			if !ok {
				done = true
				break
			}
			got = append(got, wd)
		case <-timeout:
			t.Fatalf("the Watch did not close; it sent %v", seen())
		}
	}
	require.Lenf(t, got, 1, "the Watch sent more than its end: %v", seen())
	require.ErrorIs(t, got[0].Err, topo.NoNode, "the Watch of the deleted file")
}

// TestWatchRecursiveOfFileRecreatedAcrossCompaction: a file under a
// WatchRecursive, deleted and re-created while the watching Conn is cut
// off, the deletion compacted away before the watch resumes, is reported
// deleted and then with its new value, as when the watch sees both
// events: the re-read after the compaction tells the new file by its
// CreateRevision, not only by its ModRevision (it once sent the new value
// as a change of the old file).
func TestWatchRecursiveOfFileRecreatedAcrossCompaction(t *testing.T) {
	var ch <-chan *topo.WatchDataRecursive
	v := recreateWhileCut(t, "r/f", func(w topo.Conn) {
		wctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		var err error
		_, ch, err = w.WatchRecursive(wctx, "r/")
		require.NoError(t, err)
	})

	var got []string
	for len(got) < 2 {
		select {
		case wd := <-ch:
			require.Equal(t, "r/f", wd.Path)
			if wd.Err != nil {
				require.ErrorIs(t, wd.Err, topo.NoNode)
				got = append(got, "deleted")
				continue
			}
			require.Equal(t, v.String(), wd.Version.String())
			got = append(got, string(wd.Contents))
		case <-time.After(40 * time.Second):
			t.Fatalf("the WatchRecursive sent only %v", got)
		}
	}
	require.Equal(t, []string{"deleted", "second"}, got)
}

// recreateWhileCut creates file at a fresh root of a fresh etcd, has watch
// start a watch on a second Conn behind a proxy, then cuts that Conn off,
// deletes file and creates it again ("second": its version is returned),
// compacts the store past the deletion and heals the proxy.
func recreateWhileCut(t *testing.T, file string, watch func(w topo.Conn)) topo.Version {
	addr := etcdtest.Start(t)
	root := newRoot()
	ctx := context.Background()
	c := openConn(t, addr, root)
	_, err := c.Create(ctx, file, []byte("first"))
	require.NoError(t, err)
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	watch(openConn(t, p.Addr(), root))

	p.Blackhole()
	require.NoError(t, c.Delete(ctx, file, nil))
	v, err := c.Create(ctx, file, []byte("second"))
	require.NoError(t, err)
	resp, err := rawClient(t, addr).Put(ctx, root+"/other", "x")
	require.NoError(t, err)
	_, err = rawClient(t, addr).Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	// The watch's stream breaks; it resumes past the compacted revision.
	p.Reset()
	p.Heal()
	return v
}
