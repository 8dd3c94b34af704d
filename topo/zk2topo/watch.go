package zk2topo

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watchBuffer is the capacity of the channels Watch and WatchRecursive
// return.
const watchBuffer = 16

// endError is the error a watch ends with when the client library stops
// watching: Interrupted once the Conn is closed, Unavailable (wrapping
// zk.ErrSessionExpired) when the session expired.
func (c *Conn) endError(p string, err error) error {
	if c.closed.Load() {
		return topo.NewError(topo.Interrupted, p)
	}
	if err == nil {
		err = zk.ErrSessionExpired
	}
	return backendkit.Wrap(topo.Unavailable, p, err)
}

// Watch returns filePath's current contents and a channel of its later
// values, from a data watch re-armed (with a read) after every event, so
// rapid changes may be coalesced but the last value sent is the latest. A
// delete sends NoNode and closes the channel; cancelling ctx or closing the
// Conn sends Interrupted and closes it; when the session ends it sends
// Unavailable and closes it (a new Watch then works on the new session); a
// permission refusal while re-arming sends PermissionDenied and closes it.
// Errors: NoNode (no channel) when the file is absent, InvalidPath,
// PermissionDenied, Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	if err := backendkit.CheckContext(ctx, filePath); err != nil {
		return nil, nil, err
	}
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, nil, err
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, nil, err
	}
	zp := c.zkPath(p)
	data, st, ev, err := c.getW(ctx, p, zp)
	if err != nil {
		return nil, nil, err
	}
	if !isFile(st) || st.EphemeralOwner != 0 || c.internal(p) {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	if data == nil {
		data = []byte{}
	}
	first := &topo.WatchData{Contents: data, Version: topo.NumericVersion(st.Version)}
	out := make(chan *topo.WatchData, watchBuffer)
	// Not tracked by c.bg: Close must not wait on a consumer that stopped
	// draining the channel. It shares nothing with the caller but out: its
	// reads go to variables of its own.
	go func(last int32, ev <-chan zk.Event) {
		defer close(out)
		send := func(wd *topo.WatchData) bool {
			select {
			case out <- wd:
				return true
			case <-ctx.Done():
			case <-c.closing:
			}
			return false
		}
		end := func(err error) { out <- &topo.WatchData{Err: err} }
		for {
			select {
			case e := <-ev:
				if e.Type == zk.EventNotWatching {
					end(c.endError(p, e.Err))
					return
				}
				if e.Type == zk.EventNodeDeleted {
					end(topo.NewError(topo.NoNode, p))
					return
				}
				data, st, next, err := c.getW(ctx, p, zp)
				switch {
				case topo.IsErrType(err, topo.NoNode):
					end(topo.NewError(topo.NoNode, p))
					return
				case err != nil:
					if c.closed.Load() || ctx.Err() != nil {
						end(topo.NewError(topo.Interrupted, p))
					} else {
						end(err)
					}
					return
				case !isFile(st):
					end(topo.NewError(topo.NoNode, p))
					return
				}
				ev = next
				if st.Version != last {
					last = st.Version
					if data == nil {
						data = []byte{}
					}
					if !send(&topo.WatchData{Contents: data, Version: topo.NumericVersion(st.Version)}) {
						end(topo.NewError(topo.Interrupted, p))
						return
					}
				}
			case <-ctx.Done():
				end(topo.NewError(topo.Interrupted, p))
				return
			case <-c.closing:
				end(topo.NewError(topo.Interrupted, p))
				return
			}
		}
	}(st.Version, ev)
	return first, out, nil
}

// getW reads zp and sets a data watch on it, retrying while the connection
// is re-established.
func (c *Conn) getW(ctx context.Context, p, zp string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	var data []byte
	var st *zk.Stat
	var ev <-chan zk.Event
	err := c.read(ctx, p, func(z *zk.Conn) error {
		var err error
		data, st, ev, err = z.GetW(zp)
		return err
	})
	if err != nil {
		return nil, nil, nil, c.convert(err, p)
	}
	return data, st, ev, nil
}

// WatchRecursive returns every file whose path starts with prefix, each
// with its own Stat.Version, and a channel of later per-file events. It is
// built from ZooKeeper's one-shot watches: a data watch and a child watch on
// every znode below the prefix's directory (and an exists watch on that
// directory while it is absent), each re-armed by the read that follows its
// event, so no change is lost: files created while the watch starts, and
// every later create, change and delete, are reported (a file's rapid
// changes may be coalesced into its latest value). A delete sends Err NoNode
// for that file and the channel stays open. Cancelling ctx or closing the
// Conn sends Interrupted and closes the channel; session expiry sends
// Unavailable and closes it. It costs two reads per znode to start. Errors:
// InvalidPath, Timeout/Interrupted, Closed, Unavailable.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	if err := backendkit.CheckContext(ctx, prefix); err != nil {
		return nil, nil, err
	}
	pp, err := topo.CleanPrefix(prefix)
	if err != nil {
		return nil, nil, err
	}
	if err := c.begin(ctx, pp); err != nil {
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
	w.dead = dir != "" && c.internal(dir)
	if err := w.start(); err != nil {
		close(w.done)
		return nil, nil, err
	}
	var initial []*topo.WatchDataRecursive
	for zp, n := range w.nodes {
		if n.file {
			initial = append(initial, &topo.WatchDataRecursive{Path: c.relPath(zp),
				WatchData: topo.WatchData{Contents: n.data, Version: topo.NumericVersion(n.version)}})
			n.data = nil
		}
	}
	sort.Slice(initial, func(i, j int) bool { return initial[i].Path < initial[j].Path })
	out := make(chan *topo.WatchDataRecursive, watchBuffer)
	go w.run(out) // not tracked by c.bg, as for Watch
	return initial, out, nil
}

// treeWatch is the state of one WatchRecursive, owned by its goroutine
// (and by start before that goroutine runs).
type treeWatch struct {
	c      *Conn
	ctx    context.Context
	prefix string
	base   string // znode of the directory the prefix lies in
	name   string // prefix the base's children's names must have
	dead   bool   // the prefix is inside lock/election internals: never matches

	nodes  map[string]*treeNode // watched znodes below base
	added  []string             // znodes scanned by the current handle call
	events chan treeEvent
	done   chan struct{} // closed when the watch ends: forwarders stop
	err    error         // set when the watch must end
}

type treeNode struct {
	file    bool
	version int32
	data    []byte // initial contents, until reported
}

type treeEvent struct {
	zp   string
	kind int // evData, evChildren, evBase
	ev   zk.Event
}

const (
	evData = iota
	evChildren
	evBase
)

// forward relays one client watch channel's event to the watch goroutine.
func (w *treeWatch) forward(zp string, kind int, ch <-chan zk.Event) {
	go func() {
		select {
		case ev := <-ch:
			select {
			case w.events <- treeEvent{zp: zp, kind: kind, ev: ev}:
			case <-w.done:
			}
		case <-w.done:
		}
	}()
}

// matches reports whether znode zp (below base) is under the prefix.
func (w *treeWatch) matches(zp string) bool {
	p := w.c.relPath(zp)
	return strings.HasPrefix(p, w.prefix) && !w.c.internal(p)
}

// start arms the watches on the base directory and everything below it.
func (w *treeWatch) start() error {
	if w.dead {
		return nil
	}
	return w.armBase()
}

// armBase watches the base directory: its children if it exists, its
// creation otherwise.
func (w *treeWatch) armBase() error {
	c := w.c
	for {
		var children []string
		var ch <-chan zk.Event
		err := c.read(w.ctx, w.prefix, func(z *zk.Conn) error {
			var err error
			children, _, ch, err = z.ChildrenW(w.base)
			return err
		})
		if err == nil {
			w.forward(w.base, evBase, ch)
			for _, n := range children {
				if strings.HasPrefix(n, w.name) {
					if err := w.scan(w.join(w.base, n)); err != nil {
						return err
					}
				}
			}
			return nil
		}
		if !errors.Is(err, zk.ErrNoNode) {
			return c.convert(err, w.prefix)
		}
		var exists bool
		err = c.read(w.ctx, w.prefix, func(z *zk.Conn) error {
			var err error
			exists, _, ch, err = z.ExistsW(w.base)
			return err
		})
		if err != nil {
			return c.convert(err, w.prefix)
		}
		if !exists {
			w.forward(w.base, evBase, ch)
			return nil
		}
		// Created in between: the exists watch fires too; list it now.
		w.forward(w.base, evBase, ch)
	}
}

func (w *treeWatch) join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// scan starts watching znode zp (already known to match) and, recursively,
// its children. Nodes already watched are only re-read by their own events.
func (w *treeWatch) scan(zp string) error {
	if _, ok := w.nodes[zp]; ok {
		return nil
	}
	if !w.matches(zp) {
		return nil
	}
	c := w.c
	p := c.relPath(zp)
	data, st, ev, err := c.getW(w.ctx, p, zp)
	if topo.IsErrType(err, topo.NoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.EphemeralOwner != 0 {
		return nil // a lock or election entry
	}
	n := &treeNode{file: isFile(st), version: st.Version}
	if n.file {
		if data == nil {
			data = []byte{}
		}
		n.data = data
	}
	w.nodes[zp] = n
	w.added = append(w.added, zp)
	w.forward(zp, evData, ev)
	return w.scanChildren(zp)
}

// scanChildren re-arms the child watch of a watched znode and scans
// children not yet watched.
func (w *treeWatch) scanChildren(zp string) error {
	c := w.c
	var children []string
	var ch <-chan zk.Event
	err := c.read(w.ctx, c.relPath(zp), func(z *zk.Conn) error {
		var err error
		children, _, ch, err = z.ChildrenW(zp)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil // its data watch reports the delete
	}
	if err != nil {
		return c.convert(err, c.relPath(zp))
	}
	w.forward(zp, evChildren, ch)
	for _, n := range children {
		if err := w.scan(w.join(zp, n)); err != nil {
			return err
		}
	}
	return nil
}

// run processes watch events until ctx ends, the Conn closes or the
// session expires.
func (w *treeWatch) run(out chan<- *topo.WatchDataRecursive) {
	c := w.c
	defer close(out)
	defer close(w.done)
	interrupted := func() *topo.WatchDataRecursive {
		return &topo.WatchDataRecursive{Path: w.prefix, WatchData: topo.WatchData{Err: topo.NewError(topo.Interrupted, w.prefix)}}
	}
	send := func(wd *topo.WatchDataRecursive) bool {
		select {
		case out <- wd:
			return true
		case <-w.ctx.Done():
		case <-c.closing:
		}
		return false
	}
	for {
		select {
		case <-w.ctx.Done():
			out <- interrupted()
			return
		case <-c.closing:
			out <- interrupted()
			return
		case te := <-w.events:
			if te.ev.Type == zk.EventNotWatching {
				if c.closed.Load() || w.ctx.Err() != nil {
					out <- interrupted()
				} else {
					out <- &topo.WatchDataRecursive{Path: w.prefix, WatchData: topo.WatchData{Err: c.endError(w.prefix, te.ev.Err)}}
				}
				return
			}
			evs, err := w.handle(te)
			for _, wd := range evs {
				if !send(wd) {
					out <- interrupted()
					return
				}
			}
			if err != nil {
				if c.closed.Load() || w.ctx.Err() != nil {
					out <- interrupted()
				} else {
					out <- &topo.WatchDataRecursive{Path: w.prefix, WatchData: topo.WatchData{Err: err}}
				}
				return
			}
		}
	}
}

// handle processes one fired watch and returns the events to send.
func (w *treeWatch) handle(te treeEvent) ([]*topo.WatchDataRecursive, error) {
	c := w.c
	var out []*topo.WatchDataRecursive
	// scanNew scans new znodes and reports the files among them.
	scanNew := func(f func() error) error {
		w.added = w.added[:0]
		err := f()
		var created []*topo.WatchDataRecursive
		for _, zp := range w.added {
			if n := w.nodes[zp]; n != nil && n.file && n.data != nil {
				created = append(created, &topo.WatchDataRecursive{Path: c.relPath(zp),
					WatchData: topo.WatchData{Contents: n.data, Version: topo.NumericVersion(n.version)}})
				n.data = nil
			}
		}
		sort.Slice(created, func(i, j int) bool { return created[i].Path < created[j].Path })
		out = append(out, created...)
		return err
	}
	switch te.kind {
	case evBase:
		return out, scanNew(w.armBase)
	case evChildren:
		if _, ok := w.nodes[te.zp]; !ok {
			return nil, nil
		}
		return out, scanNew(func() error { return w.scanChildren(te.zp) })
	case evData:
		n, ok := w.nodes[te.zp]
		if !ok {
			return nil, nil
		}
		p := c.relPath(te.zp)
		deleted := func() {
			delete(w.nodes, te.zp)
			if n.file {
				out = append(out, &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, p)}})
			}
		}
		if te.ev.Type == zk.EventNodeDeleted {
			deleted()
			// It may have been created again already (its parent's child
			// event may have been handled while it was still listed).
			return out, scanNew(func() error { return w.scan(te.zp) })
		}
		data, st, ev, err := c.getW(w.ctx, p, te.zp)
		if topo.IsErrType(err, topo.NoNode) {
			deleted()
			return out, scanNew(func() error { return w.scan(te.zp) })
		}
		if err != nil {
			return nil, err
		}
		w.forward(te.zp, evData, ev)
		file := isFile(st)
		switch {
		case file && (!n.file || st.Version != n.version):
			if data == nil {
				data = []byte{}
			}
			out = append(out, &topo.WatchDataRecursive{Path: p,
				WatchData: topo.WatchData{Contents: data, Version: topo.NumericVersion(st.Version)}})
		case !file && n.file:
			out = append(out, &topo.WatchDataRecursive{Path: p, WatchData: topo.WatchData{Err: topo.NewError(topo.NoNode, p)}})
		}
		n.file, n.version = file, st.Version
		return out, nil
	}
	return nil, nil
}
