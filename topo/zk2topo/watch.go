package zk2topo

import (
	"context"
	"errors"
	"path"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watchBuffer is the capacity of the channels Watch and WatchRecursive
// return.
const watchBuffer = 16

// endError is a watch's error when the library stops watching:
// Interrupted after Close, else Unavailable (the session expired).
func (c *Conn) endError(p string, err error) error {
	if c.closed.Load() {
		return topo.NewError(topo.Interrupted, p)
	}
	if err == nil {
		err = zk.ErrSessionExpired
	}
	return backendkit.Wrap(topo.Unavailable, p, err)
}

// Watch returns filePath's contents and a channel of its later values,
// from a data watch re-armed with a read after every event (rapid changes
// may be coalesced; the last value sent is the latest). The channel's last
// value, before it closes, is an error: NoNode on a delete (also a delete
// and create while disconnected: the new Czxid tells), Interrupted when
// ctx ends or the Conn closes, Unavailable when the session ends (a new
// Watch then works), PermissionDenied when re-arming is refused. Revision
// is the value's Stat.Mzxid (the value holds every change up to it; 0 on
// errors). Errors: NoNode (file absent), InvalidPath, PermissionDenied,
// Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.closed.Load)
	if err != nil {
		return nil, nil, err
	}
	zp := c.zkPath(p)
	r, err := c.getW(ctx, p, zp)
	if err != nil {
		return nil, nil, err
	}
	if !isFile(r.st) || r.st.EphemeralOwner != 0 || c.internal(p) {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	first := &topo.WatchData{Contents: orEmpty(r.data), Version: topo.NumericVersion(r.st.Version), Revision: r.st.Mzxid}
	out := make(chan *topo.WatchData, watchBuffer)
	// Not tracked by c.bg: Close must not wait on a consumer that stopped
	// draining out.
	go func() {
		defer close(out)
		out <- &topo.WatchData{Err: c.followFile(ctx, p, zp, r.st.Czxid, r.st.Mzxid, r.ch, out)}
	}()
	return first, out, nil
}

// followFile sends the later values of the file p (znode zp, Czxid
// created, last read at Mzxid last, watch ev) on out and returns the error
// the watch ends with. A read at the same Mzxid (an event re-reported by
// set-watches) sends nothing; a new Czxid ends it with NoNode, as on the
// other backends (TestWatchOfFileRecreatedWhileDisconnected).
func (c *Conn) followFile(ctx context.Context, p, zp string, created, last int64, ev <-chan zk.Event, out chan<- *topo.WatchData) error {
	interrupted := topo.NewError(topo.Interrupted, p)
	for {
		select {
		case <-ctx.Done():
			return interrupted
		case <-c.closing:
			return interrupted
		case e := <-ev:
			switch e.Type {
			case zk.EventNotWatching:
				return c.endError(p, e.Err)
			case zk.EventNodeDeleted:
				return topo.NewError(topo.NoNode, p)
			}
		}
		r, err := c.getW(ctx, p, zp)
		switch {
		case topo.IsErrType(err, topo.NoNode), err == nil && (!isFile(r.st) || r.st.Czxid != created):
			return topo.NewError(topo.NoNode, p)
		case err != nil && (c.closed.Load() || ctx.Err() != nil):
			return interrupted
		case err != nil:
			return err
		}
		ev = r.ch
		if r.st.Mzxid == last {
			continue
		}
		last = r.st.Mzxid
		select {
		case out <- &topo.WatchData{Contents: orEmpty(r.data), Version: topo.NumericVersion(r.st.Version), Revision: r.st.Mzxid}:
		case <-ctx.Done():
			return interrupted
		case <-c.closing:
			return interrupted
		}
	}
}

// orEmpty returns data, or an empty slice for nil.
func orEmpty(data []byte) []byte {
	if data == nil {
		return []byte{}
	}
	return data
}

// getW reads zp with a data watch.
func (c *Conn) getW(ctx context.Context, p, zp string) (getRes, error) {
	r, err := c.getOn(ctx, nil, p, zp, true)
	if err != nil {
		return getRes{}, c.convert(err, p)
	}
	return r, nil
}

// WatchRecursive returns every file whose path starts with prefix, with
// its Stat.Version, and a channel of later per-file events, from a data
// and a child watch on every znode below the prefix's directory (an
// exists watch on it while absent), each re-armed by the read after its
// event: every create, change and delete is reported (rapid changes may
// be coalesced, but not a deletion: a file deleted and created again
// between two reads, its Czxid new, is reported deleted, then with its
// value). A delete sends NoNode for that file, the channel staying
// open; ctx's end or Close sends Interrupted, session expiry Unavailable,
// and closes it. Two reads per znode to start. Revision is 0: events come
// through one goroutine per znode, unordered across files. Errors:
// InvalidPath, Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	pp, err := backendkit.Begin(ctx, prefix, topo.CleanPrefix, c.closed.Load)
	if err != nil {
		return nil, nil, err
	}
	dir, name := splitPrefix(pp)
	w := &treeWatch{
		c:      c,
		ctx:    ctx,
		prefix: pp,
		base:   c.zkPath(dir),
		name:   name,
		nodes:  map[string]*treeNode{},
		events: make(chan treeEvent, 256),
		done:   make(chan struct{}),
	}
	// A prefix inside the lock and election layout never matches.
	if dir == "" || !c.internal(dir) {
		if err := w.armBase(); err != nil {
			close(w.done)
			return nil, nil, err
		}
	}
	initial := w.newFiles()
	out := make(chan *topo.WatchDataRecursive, watchBuffer)
	go w.run(out) // not tracked by c.bg, as for Watch
	return initial, out, nil
}

// treeWatch is the state of one WatchRecursive, owned by its goroutine.
type treeWatch struct {
	c      *Conn
	ctx    context.Context
	prefix string
	base   string // znode of the directory the prefix lies in
	name   string // prefix the base's children's names must have

	nodes  map[string]*treeNode // watched znodes below base
	added  []string             // znodes scanned by the current handle call
	events chan treeEvent
	done   chan struct{} // closed when the watch ends: forwarders stop
}

type treeNode struct {
	file    bool
	version int32
	mzxid   int64  // read with version, which a re-created file may repeat
	czxid   int64  // of the znode's creation: another one is another life
	data    []byte // initial contents, until reported
}

type treeEvent struct {
	zp   string
	kind int       // evData, evChildren, evBase
	node *treeNode // the life of zp the watch was set for (nil for evBase)
	ev   zk.Event
}

const (
	evData = iota
	evChildren
	evBase
)

// forward relays one client watch channel's event, of a watch set for
// node (nil for the base), to the watch goroutine.
func (w *treeWatch) forward(zp string, kind int, node *treeNode, ch <-chan zk.Event) {
	go func() {
		select {
		case ev := <-ch:
			select {
			case w.events <- treeEvent{zp: zp, kind: kind, node: node, ev: ev}:
			case <-w.done:
			}
		case <-w.done:
		}
	}()
}

// armBase watches the base directory's children, or its creation.
func (w *treeWatch) armBase() error {
	c := w.c
	for {
		kids, err := c.childrenOn(w.ctx, nil, w.prefix, w.base, true)
		if err == nil {
			w.forward(w.base, evBase, nil, kids.ch)
			for _, n := range kids.names {
				if strings.HasPrefix(n, w.name) {
					if err := w.scan(path.Join(w.base, n)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return c.convert(err, w.prefix)
		}
		r := c.statOn(w.ctx, nil, w.prefix, w.base, true)
		if r.err != nil {
			return c.convert(r.err, w.prefix)
		}
		w.forward(w.base, evBase, nil, r.ch)
		if !r.exists {
			return nil
		}
		// Created in between: list it now.
	}
}

// scan starts watching znode zp and, recursively, its children.
func (w *treeWatch) scan(zp string) error {
	c := w.c
	p := c.relPath(zp)
	if _, ok := w.nodes[zp]; ok || !strings.HasPrefix(p, w.prefix) || c.internal(p) {
		return nil // watched already, or not under the prefix
	}
	r, err := c.getW(w.ctx, p, zp)
	if topo.IsErrType(err, topo.NoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if r.st.EphemeralOwner != 0 {
		return nil // a lock or election entry
	}
	n := &treeNode{file: isFile(r.st), version: r.st.Version, mzxid: r.st.Mzxid, czxid: r.st.Czxid}
	if n.file {
		n.data = orEmpty(r.data)
	}
	w.nodes[zp] = n
	w.added = append(w.added, zp)
	w.forward(zp, evData, n, r.ch)
	return w.scanChildren(zp)
}

// scanChildren re-arms zp's child watch and scans its children.
func (w *treeWatch) scanChildren(zp string) error {
	c := w.c
	kids, err := c.childrenOn(w.ctx, nil, c.relPath(zp), zp, true)
	if errors.Is(err, zk.ErrNoNode) {
		return nil // its data watch reports the delete
	}
	if err != nil {
		return c.convert(err, c.relPath(zp))
	}
	w.forward(zp, evChildren, w.nodes[zp], kids.ch)
	for _, n := range kids.names {
		if err := w.scan(path.Join(zp, n)); err != nil {
			return err
		}
	}
	return nil
}

// run follows the watch and sends the error it ends with.
func (w *treeWatch) run(out chan<- *topo.WatchDataRecursive) {
	defer close(out)
	defer close(w.done)
	err := w.follow(out)
	if w.c.closed.Load() || w.ctx.Err() != nil {
		err = topo.NewError(topo.Interrupted, w.prefix)
	}
	out <- &topo.WatchDataRecursive{Path: w.prefix, WatchData: topo.WatchData{Err: err}}
}

// follow handles fired watches, sending their events on out, until the
// watch ends; it returns why.
func (w *treeWatch) follow(out chan<- *topo.WatchDataRecursive) error {
	c := w.c
	interrupted := topo.NewError(topo.Interrupted, w.prefix)
	for {
		var te treeEvent
		select {
		case <-w.ctx.Done():
			return interrupted
		case <-c.closing:
			return interrupted
		case te = <-w.events:
		}
		if te.ev.Type == zk.EventNotWatching {
			return c.endError(w.prefix, te.ev.Err)
		}
		evs, err := w.handle(te)
		for _, wd := range evs {
			select {
			case out <- wd:
			case <-w.ctx.Done():
				return interrupted
			case <-c.closing:
				return interrupted
			}
		}
		if err != nil {
			return err
		}
	}
}

// newFiles returns the first contents of the files scanned since its last
// call, sorted by path.
func (w *treeWatch) newFiles() []*topo.WatchDataRecursive {
	var out []*topo.WatchDataRecursive
	for _, zp := range w.added {
		if n := w.nodes[zp]; n != nil && n.file && n.data != nil {
			out = append(out, fileEvent(w.c.relPath(zp), n.data, n.version))
			n.data = nil
		}
	}
	w.added = w.added[:0]
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// fileEvent is the event of file p's contents data at version v.
func fileEvent(p string, data []byte, v int32) *topo.WatchDataRecursive {
	return &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Contents: orEmpty(data), Version: topo.NumericVersion(v)}}
}

// goneEvent is the event of file p's deletion.
func goneEvent(p string) *topo.WatchDataRecursive {
	return &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, p)}}
}

// handle processes one fired watch and returns the events to send.
func (w *treeWatch) handle(te treeEvent) ([]*topo.WatchDataRecursive, error) {
	n, ok := w.nodes[te.zp]
	switch {
	case te.kind == evBase:
		return w.scanNew(nil, w.armBase)
	case !ok || n != te.node:
		// A watch set for an earlier life of the znode: the scan of the
		// current one set watches of its own (re-arming this one too
		// would add a watch, and a goroutine, at every re-creation).
		return nil, nil
	case te.kind == evChildren:
		return w.scanNew(nil, func() error { return w.scanChildren(te.zp) })
	}
	p := w.c.relPath(te.zp)
	var r getRes
	var err error
	if te.ev.Type != zk.EventNodeDeleted {
		r, err = w.c.getW(w.ctx, p, te.zp)
	}
	if te.ev.Type == zk.EventNodeDeleted || topo.IsErrType(err, topo.NoNode) {
		delete(w.nodes, te.zp)
		var out []*topo.WatchDataRecursive
		if n.file {
			out = append(out, goneEvent(p))
		}
		// It may be back already.
		return w.scanNew(out, func() error { return w.scan(te.zp) })
	}
	if err != nil {
		return nil, err
	}
	w.forward(te.zp, evData, n, r.ch)
	var out []*topo.WatchDataRecursive
	file := isFile(r.st)
	switch {
	case file && n.file && r.st.Czxid != n.czxid:
		// Deleted and created again since the last read: the deletion
		// is reported too, never coalesced away.
		out = append(out, goneEvent(p), fileEvent(p, r.data, r.st.Version))
	case file && (!n.file || r.st.Mzxid != n.mzxid):
		out = append(out, fileEvent(p, r.data, r.st.Version))
	case !file && n.file:
		out = append(out, goneEvent(p))
	}
	n.file, n.version, n.mzxid, n.czxid = file, r.st.Version, r.st.Mzxid, r.st.Czxid
	return out, nil
}

// scanNew runs scan (which scans new znodes) and appends the files among
// them to out.
func (w *treeWatch) scanNew(out []*topo.WatchDataRecursive, scan func() error) ([]*topo.WatchDataRecursive, error) {
	err := scan()
	return append(out, w.newFiles()...), err
}
