package topoctl

// watch FILE FILE...: several files share one store watch through a read
// cache (topo/cache) over their longest common directory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
)

// watchFilesBuffer is how many changes of one file a watch of several
// files holds for a slow output before the cache drops its watcher (and
// watch prints the file's current value again, with a note).
const watchFilesBuffer = 1024

// watchFilesMaxBytes bounds the memory of the cache of a watch of several
// files (paths plus values of every file under their common directory).
const watchFilesMaxBytes = 256 << 20

// commonDir returns the longest directory prefix ("" for the root, else
// ending in "/") holding every canonical file path of paths.
func commonDir(paths []string) string {
	dir := func(p string) string { return p[:strings.LastIndexByte(p, '/')+1] }
	d := dir(paths[0])
	for _, p := range paths[1:] {
		q := dir(p)
		n := 0
		for n < len(d) && n < len(q) && d[n] == q[n] {
			n++
		}
		d = dir(d[:n])
	}
	return d
}

// watchFiles is watch with several FILE arguments (canonical paths, no
// duplicates): one cache over their common directory, one local watcher
// per file, each printing as watch FILE does. It returns when ctx ends
// (nil), when every file's watch has ended with its deletion (nil), or
// with the first error that ends one.
func (o *watching) watchFiles(ctx context.Context, paths []string, wait bool) error {
	st, wctx, cancel, err := o.openWatch(ctx, func(c context.Context, conn topo.Conn) error {
		for _, p := range paths {
			if _, _, err := conn.Get(c, p); err != nil && !(wait && topo.IsErrType(err, topo.NoNode)) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer st.Close()
	defer cancel()
	health := &healthLog{wake: make(chan struct{}, 1)}
	opts := cache.Options{
		// A local watcher stays registered through an outage; memory
		// answers re-registrations whatever its age, and the relist after
		// the outage tells every watcher what changed meanwhile.
		MaxStaleness:  time.Duration(math.MaxInt64),
		MaxBytes:      watchFilesMaxBytes,
		WatcherBuffer: watchFilesBuffer,
		LeaveConnOpen: true,
		Logger:        o.out.log,
	}
	if o.stores.metrics != nil {
		opts.Hooks = o.stores.metrics.CacheHooks("watch")
	}
	opts.Hooks.OnHealth = health.chain(opts.Hooks.OnHealth)
	c, err := newCache(wctx, st.conn, commonDir(paths), opts)
	if err != nil {
		return endOfWatch(ctx, err)
	}
	defer c.Close()
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err })
		cancel() // one file's failure ends them all
	}
	// result is the command's result: the first failure (reportHealth's
	// may come at any time), else err. Its once.Do orders the read of
	// first after any fail's write.
	result := func(err error) error {
		once.Do(func() { first = err })
		return endOfWatch(ctx, first)
	}
	stopHealth := o.reportHealth(wctx, c, st, health, fail)
	defer stopHealth()

	// Every file is registered before anything is printed: a missing FILE
	// (without --wait) fails the command with nothing printed.
	fws := make([]*fileWatch, len(paths))
	for i, p := range paths {
		fw := &fileWatch{o: o, c: c, p: p}
		if err := fw.register(wctx); err != nil {
			return result(err)
		}
		if !fw.exists && !wait {
			return result(topo.NewError(topo.NoNode, displayPath(p)))
		}
		fws[i] = fw
	}
	for _, fw := range fws {
		if fw.exists {
			// The first values in the order of the arguments.
			if err := fw.print(&fw.cur); err != nil {
				return result(err)
			}
		}
	}
	var wg sync.WaitGroup
	for _, fw := range fws {
		wg.Go(func() {
			if err := fw.follow(wctx); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	return result(nil)
}

// newCache runs cache.New, whose first listing no context bounds, until
// ctx ends (Interrupted; the cache, if it comes, is closed then).
func newCache(ctx context.Context, conn topo.Conn, prefix string, opts cache.Options) (*cache.Cache, error) {
	type made struct {
		c   *cache.Cache
		err error
	}
	ch := make(chan made, 1)
	go func() {
		c, err := cache.New(conn, prefix, opts)
		ch <- made{c, err}
	}()
	select {
	case m := <-ch:
		return m.c, at(m.err, prefix)
	case <-ctx.Done():
		go func() {
			if m := <-ch; m.c != nil {
				m.c.Close()
			}
		}()
		return nil, topo.NewError(topo.Interrupted, displayPath(prefix))
	}
}

// fileWatch is one file of a watch of several: a local watcher of the
// cache (a WatchRecursive of the file's path, keeping that path's events,
// which, unlike the cache's Watch, never falls back to a store watch of
// its own and goes on through a deletion, as --wait needs), and what was
// printed last.
type fileWatch struct {
	o *watching
	c *cache.Cache
	p string
	// cur is the file's value when the watcher was registered, and
	// exists whether it existed then.
	cur    topo.WatchData
	exists bool
	ch     <-chan *topo.WatchDataRecursive
	cancel context.CancelFunc
	// printed is whether a value was printed, and last that value.
	printed bool
	last    topo.WatchData
	// waiting is whether the note that the file does not exist yet was
	// printed.
	waiting bool
}

// register adds the file's local watcher to the cache.
func (fw *fileWatch) register(ctx context.Context) error {
	wctx, cancel := context.WithCancel(ctx)
	initial, ch, err := fw.c.WatchRecursive(wctx, fw.p)
	if err != nil {
		cancel()
		return at(err, fw.p)
	}
	if st := fw.c.State(); st.Health == cache.OverLimit {
		// The cache let the watch through to the store: it holds no files.
		drainAfter(cancel, ch)
		return fmt.Errorf("%w (the files' common directory holds more than %d MiB: run one watch per file)", st.Err, watchFilesMaxBytes>>20)
	}
	fw.ch, fw.cancel, fw.exists = ch, cancel, false
	for _, wd := range initial {
		if wd.Path == fw.p {
			fw.cur, fw.exists = wd.WatchData, true
		}
	}
	return nil
}

// print prints one value of the file (nil: its deletion) unless it is
// the one printed last.
func (fw *fileWatch) print(wd *topo.WatchData) error {
	ev := watchEvent{Path: displayPath(fw.p), Deleted: wd == nil}
	if wd != nil {
		if fw.printed && fw.last.Version.String() == wd.Version.String() && bytes.Equal(fw.last.Contents, wd.Contents) {
			return nil
		}
		fw.printed, fw.last = true, *wd
		ev.Version, ev.Value = jsonVersion(wd.Version.String()), wd.Contents
	}
	fw.o.mu.Lock()
	defer fw.o.mu.Unlock()
	return fw.o.printEvent(ev)
}

// follow prints the file's value (or waits for its creation), then every
// change, until its deletion (nil) or an error. A watcher the cache
// drops for falling behind (a slow output) is registered again and the
// file's current value printed, with a note on stderr.
func (fw *fileWatch) follow(ctx context.Context) error {
	for {
		switch {
		case fw.exists:
			if err := fw.print(&fw.cur); err != nil {
				drainAfter(fw.cancel, fw.ch)
				return err
			}
		case fw.printed:
			drainAfter(fw.cancel, fw.ch)
			return fw.print(nil) // deleted while the watcher was dropped
		case !fw.waiting:
			fw.waiting = true
			fw.o.out.eprintf("topoctl: %s does not exist yet: waiting for it to be created\n", displayPath(fw.p))
		}
		end := error(topo.NewError(topo.Interrupted, fw.p))
		for wd := range fw.ch {
			var err error
			switch {
			case wd.Err == nil && wd.Path == fw.p:
				err = fw.print(&wd.WatchData)
			case topo.IsErrType(wd.Err, topo.NoNode) && wd.Path == fw.p && fw.printed:
				drainAfter(fw.cancel, fw.ch)
				return fw.print(nil)
			case wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode):
				end = wd.Err
			}
			if err != nil {
				drainAfter(fw.cancel, fw.ch)
				return err
			}
		}
		fw.cancel()
		if !errors.Is(end, cache.ErrSlowWatcher) || ctx.Err() != nil {
			return end
		}
		fw.o.out.eprintf("topoctl: %s: the output fell more than %d changes behind: the changes after those were skipped; the current value follows\n",
			displayPath(fw.p), watchFilesBuffer)
		if err := fw.register(ctx); err != nil {
			return err
		}
	}
}

// healthLog queues a cache's health changes (its OnHealth hook, which
// must not call the cache) for reportHealth.
type healthLog struct {
	mu      sync.Mutex
	changes []cache.Health
	wake    chan struct{}
}

// chain returns an OnHealth hook that queues the change, then calls next
// (if not nil).
func (h *healthLog) chain(next func(cache.Health, time.Time)) func(cache.Health, time.Time) {
	return func(he cache.Health, since time.Time) {
		h.mu.Lock()
		h.changes = append(h.changes, he)
		h.mu.Unlock()
		select {
		case h.wake <- struct{}{}:
		default:
		}
		if next != nil {
			next(he, since)
		}
	}
}

// take returns the changes queued and empties the queue.
func (h *healthLog) take() []cache.Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.changes
	h.changes = nil
	return out
}

// reportHealth says on stderr, until ctx ends or the returned stop is
// called, when the cache c loses its store (Stale: "lost the connection
// to ADDR (ERROR): reconnecting"; Resyncing: "the store watch ended
// (ERROR): reconnecting") and when it is Healthy again ("reconnected to
// ADDR"), as watch FILE's monitor does; the ERROR of a lost connection
// is the store's address refusing connections, when it does (see
// checkListening), else the cache's failure. A refusal that watching
// again would meet again (PermissionDenied, ...: see isStoreErr) is
// passed to fail instead, and ends the watch, as it ends watch FILE.
func (o *watching) reportHealth(ctx context.Context, c *cache.Cache, st *store, h *healthLog, fail func(error)) (stop func()) {
	addr := st.spec.addr
	if addr == "" {
		addr = st.name // memory
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		down := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.wake:
			}
			for _, he := range h.take() {
				if err := c.State().Err; (he == cache.Stale || he == cache.Resyncing) && err != nil && !isStoreErr(err) {
					fail(err)
					return
				}
				switch {
				case (he == cache.Stale || he == cache.Resyncing) && !down:
					down = true
					why := "the store watch ended"
					if err := c.State().Err; err != nil {
						why = o.out.errorLine(err)
					}
					if he == cache.Stale {
						if err := o.stores.checkListening(ctx, st.spec); err != nil {
							why = o.out.errorLine(err)
						}
						o.out.eprintf("topoctl: lost the connection to %s (%s): reconnecting\n", addr, why)
					} else {
						o.out.eprintf("topoctl: the store watch ended (%s): reconnecting\n", why)
					}
				case he == cache.Healthy && down:
					down = false
					o.out.eprintf("topoctl: reconnected to %s\n", addr)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// checkWatchFiles refuses the flags a watch of several files does not
// take.
func checkWatchFiles(n int, recursive, rawPrefix, rev bool) error {
	switch {
	case n == 1:
		return nil
	case recursive || rawPrefix:
		return usagef("-R and --prefix take one DIR or PREFIX, got %d arguments (watch FILE FILE... watches several files)", n)
	case rev:
		return usagef("--rev replays the history of one FILE, DIR or PREFIX, got %d arguments: run one watch --rev per file, or watch --rev -R their directory", n)
	}
	return nil
}

// dedupPaths returns the canonical paths of args, each once, in order.
func dedupPaths(args []string) ([]string, error) {
	var paths []string
	for _, a := range args {
		p, err := topo.CleanFilePath(a)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
