package backendkit

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestSnapshotDiff: an empty snapshot reports every file (the initial
// list); later reads report the new and changed files in read order, then
// the vanished ones with NoNode in path order, and nothing for a file
// whose version did not change; a file created again (another Created)
// is reported deleted, then with its value.
func TestSnapshotDiff(t *testing.T) {
	type ev struct {
		path    string
		version int64
		gone    bool
	}
	got := func(events []*topo.WatchDataRecursive) []ev {
		out := []ev{}
		for _, e := range events {
			if e.Err != nil {
				require.True(t, topo.IsErrType(e.Err, topo.NoNode), "%v", e.Err)
				out = append(out, ev{path: e.Path, gone: true})
				continue
			}
			out = append(out, ev{path: e.Path, version: int64(e.Version.(topo.NumericVersion))})
		}
		return out
	}
	s := Snapshot{}
	require.Equal(t, []ev{{path: "a", version: 1}, {path: "b", version: 2}, {path: "c", version: 3}},
		got(s.Diff([]FileState{{Path: "a", Version: 1}, {Path: "b", Version: 2}, {Path: "c", Version: 3}})))
	require.Equal(t, []ev{}, got(s.Diff([]FileState{{Path: "a", Version: 1}, {Path: "b", Version: 2}, {Path: "c", Version: 3}})))
	require.Equal(t, []ev{{path: "d", version: 5}, {path: "b", version: 4}, {path: "a", gone: true}, {path: "c", gone: true}},
		got(s.Diff([]FileState{{Path: "d", Version: 5}, {Path: "b", Version: 4}})))
	require.Equal(t, Snapshot{"b": {Version: 4}, "d": {Version: 5}}, s)
	// b deleted and created again between two reads: its deletion first.
	require.Equal(t, []ev{{path: "b", gone: true}, {path: "b", version: 7}, {path: "d", version: 8}},
		got(s.Diff([]FileState{{Path: "b", Version: 7, Created: 6}, {Path: "d", Version: 8}})))
	require.Equal(t, Snapshot{"b": {Version: 7, Created: 6}, "d": {Version: 8}}, s)
}

// TestStamp: events of known revisions carry their change's revision when
// last of it and the one before otherwise; differences of two reads carry
// the mark until the last, which reaches the read's revision (never less
// than the mark).
func TestStamp(t *testing.T) {
	batch := func(n int) []*topo.WatchDataRecursive {
		out := make([]*topo.WatchDataRecursive, n)
		for i := range out {
			out[i] = &topo.WatchDataRecursive{}
		}
		return out
	}
	revisions := func(evs []*topo.WatchDataRecursive) []int64 {
		var out []int64
		for _, e := range evs {
			out = append(out, e.Revision)
		}
		return out
	}
	evs := batch(4)
	require.Equal(t, int64(12), Stamp(evs, []int64{10, 10, 11, 12}, 5, 12))
	require.Equal(t, []int64{9, 10, 11, 12}, revisions(evs))
	evs = batch(3)
	require.Equal(t, int64(20), Stamp(evs, nil, 7, 20))
	require.Equal(t, []int64{7, 7, 20}, revisions(evs))
	evs = batch(1)
	require.Equal(t, int64(7), Stamp(evs, nil, 7, 3))
	require.Equal(t, []int64{7}, revisions(evs))
}
