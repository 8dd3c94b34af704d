package backendkit

import (
	"sort"

	"github.com/topokit/topokit/topo"
)

// FileState is one file as a read of a prefix shows it: its canonical
// path, its contents, its version number (the store's revision of the
// key: Consul's ModifyIndex, etcd's ModRevision) and the revision that
// created it (Consul's CreateIndex, etcd's CreateRevision), which tells
// one life of the path from the next.
type FileState struct {
	Path     string
	Contents []byte
	Version  int64
	Created  int64
}

// Seen is what a Snapshot holds of one file: the version last sent and the
// creation revision of the life it belongs to.
type Seen struct {
	Version, Created int64
}

// Snapshot is what a recursive watch has reported of the files under its
// prefix: the version last sent, by path. A watch that learns of changes
// by reading the whole prefix again (consultopo at every blocking query;
// etcd2topo could after a compaction) turns each read into events with
// Diff. It is not safe for concurrent use.
//
// Two reads cannot show a file created and deleted between them, so
// Diff reports nothing for it. The conformance suite's
// WatchRecursive/Converges writes a burst and then deletes one of its
// files, and wants that deletion reported: a watch whose next read may
// come only after the whole burst (an in-process store, where the writer
// never waits) must add such deletions from a record of its own.
type Snapshot map[string]Seen

// Diff records files, a whole read of the prefix, as what the watcher
// knows, and returns the events that bring the watcher from s to it: first
// every file that is new or whose version changed, with its contents and
// version, in the order of files, a file created again since s (another
// Created) preceded by its deletion (Err NoNode: a deletion is never
// coalesced away); then every file s held that files lacks, with Err
// NoNode, in path order. On an empty Snapshot it returns the initial list
// of a WatchRecursive.
func (s Snapshot) Diff(files []FileState) []*topo.WatchDataRecursive {
	var events []*topo.WatchDataRecursive
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		seen[f.Path] = true
		old, ok := s[f.Path]
		if ok && old == (Seen{f.Version, f.Created}) {
			continue
		}
		if ok && old.Created != f.Created {
			events = append(events, &topo.WatchDataRecursive{Path: f.Path, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, f.Path)}})
		}
		s[f.Path] = Seen{f.Version, f.Created}
		events = append(events, &topo.WatchDataRecursive{Path: f.Path, WatchData: topo.WatchData{
			Contents: f.Contents, Version: topo.NumericVersion(f.Version)}})
	}
	var gone []string
	for p := range s {
		if !seen[p] {
			gone = append(gone, p)
		}
	}
	sort.Strings(gone)
	for _, p := range gone {
		delete(s, p)
		events = append(events, &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, p)}})
	}
	return events
}

// Stamp sets the Revision (see topo.WatchData.Revision) of events, one
// batch of changes a recursive watch sends in order, and returns the
// Revision of the last. mark is the Revision the watch reached before the
// batch, rev the one the batch's last event reaches; revs[i] is the
// store's revision of the change of events[i], or revs is nil when the
// batch holds the differences of two reads (whose revisions are not
// known). Every event carries the revision of its change when it is the
// last of that revision and the one before otherwise (with revs nil:
// mark), never less than the event before it; the last carries rev (mark
// when rev is lower: a store that lost its state). etcd2topo and
// consultopo stamp their WatchRecursive events with it.
func Stamp(events []*topo.WatchDataRecursive, revs []int64, mark, rev int64) int64 {
	for i, e := range events {
		switch {
		case i == len(events)-1:
			mark = max(mark, rev)
		case revs == nil:
		case revs[i+1] > revs[i]:
			mark = max(mark, revs[i])
		default:
			mark = max(mark, revs[i]-1)
		}
		e.Revision = mark
	}
	return mark
}
