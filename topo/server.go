package topo

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
)

// GlobalCell is the name of the global cell. ConnForCell(ctx, GlobalCell)
// returns the global connection.
const GlobalCell = "global"

// CellsPath is the directory of the global cell that holds one
// <cell>/CellInfo record per cell (the same layout as Vitess).
const CellsPath = "cells"

// CellInfoFile is the name of a cell's record under CellsPath/<cell>/.
const CellInfoFile = "CellInfo"

// CellInfoPath returns the global-cell path of cell's CellInfo record.
func CellInfoPath(cell string) string { return CellsPath + "/" + cell + "/" + CellInfoFile }

// Server is a topology: the connection to the global cell plus a cache of
// connections to the other cells, opened from the CellInfo records in the
// global cell. All cells use the same Factory. A Server is safe for
// concurrent use.
//
// The cache follows each cached cell's record through a Watch on the
// global cell, run in the background:
//
//   - When the record's dial parameters (server address or root) change, or
//     the record is deleted (or no longer decodes), the cached connection is
//     dropped and closed: operations on it return Closed and the locks and
//     leadership held through it are released. The next ConnForCell dials
//     anew. A rewrite that keeps address and root keeps the connection.
//   - When the watch fails transiently (Unavailable, Timeout, a lost
//     session, anything IsPermanent does not classify as permanent), the
//     cached connection is kept, open and served, and the watch is opened
//     again after a capped exponential backoff with jitter (50 ms doubling
//     up to 5 s, starting over after a watch that lived longer than 5 s).
//     The re-opened watch's first value is compared with the
//     record the connection was dialled from, so a change made while the
//     watch was down still re-dials.
//   - When the watch fails permanently (IsPermanent: PermissionDenied,
//     Closed, ...), the Server stops watching but keeps the connection open
//     and cached. From then on each ConnForCell of that cell opens the
//     watch itself, its setup bounded by the caller's context: it returns
//     the watch's error (the connection stays open), except that a deleted
//     or undecodable record closes the connection as above; it closes and
//     re-dials a changed record; and when the watch is established and the
//     record unchanged, it keeps that watch and the cell is followed again.
//
// A connection handed out by ConnForCell may thus be closed later, when its
// record changes or is deleted, by DeleteCellInfo or by Close; its users then
// get Closed and call ConnForCell again. It is never closed because of the
// global store's own failures.
type Server struct {
	global  Conn
	factory Factory
	log     *slog.Logger
	impl    string       // the backend's name, for middlewares' ConnInfo
	mws     []Middleware // decorate every connection (WithMiddleware)

	// ctx is the Server's lifetime: the watches of the cached cells run
	// under contexts derived from it, and Close cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	cells  map[string]*cellConn
	closed bool
	// epochs counts, per cell, the record changes made by this Server
	// (UpdateCellInfoFields, DeleteCellInfo): a dial that began before one
	// is not cached, since it may have read the record before the change.
	epochs map[string]uint64
}

// cellConn is one cached cell connection.
type cellConn struct {
	cell       string
	addr, root string // the CellInfo fields the conn was dialled from
	conn       Conn

	// ctx lives while conn is cached; its end stops the watch.
	ctx    context.Context
	cancel context.CancelFunc

	closeOnce sync.Once

	following bool // a watch goroutine follows the record; guarded by Server.mu
}

// matches reports whether ci has the dial parameters cc was dialled from.
func (cc *cellConn) matches(ci *topodatapb.CellInfo) bool {
	return ci.GetServerAddress() == cc.addr && ci.GetRoot() == cc.root
}

// matchesData is matches for a stored record; a record that does not decode
// does not match.
func (cc *cellConn) matchesData(data []byte) bool {
	ci := &topodatapb.CellInfo{}
	return proto.Unmarshal(data, ci) == nil && cc.matches(ci)
}

// closeConn stops following the record and closes the connection, once.
func (cc *cellConn) closeConn() {
	cc.closeOnce.Do(func() {
		cc.cancel()
		cc.conn.Close()
	})
}

// Backoff bounds of the watch that follows a cached cell's record.
const (
	cellWatchInitialBackoff = 50 * time.Millisecond
	cellWatchMaxBackoff     = 5 * time.Second
)

// OpenServer is OpenServerContext without a context: it waits for the
// factory as long as the factory takes.
func OpenServer(implementation, serverAddress, root string, opts ...ServerOption) (*Server, error) {
	return OpenServerContext(context.Background(), implementation, serverAddress, root, opts...)
}

// OpenServerContext opens the global cell of a topology stored by the
// factory registered as implementation (or the one given with WithFactory),
// at serverAddress under root, and returns the Server over it; the other
// cells are opened later, by ConnForCell, with the same factory.
//
// It returns NoImplementation (naming the registered factories) for an
// unknown implementation when no WithFactory is given, and the factory's
// error if it cannot open the connection. ctx bounds only the opening: when
// it ends before the factory returns, OpenServerContext returns Timeout (a
// deadline) or Interrupted (a cancellation) naming serverAddress, and the
// connection the factory returns later is closed. A factory that implements
// ContextFactory gets ctx and stops dialling itself; with others the dial
// runs to its end in the background. Whether a dead address is detected
// before the first call at all is the backend's: a backend that dials
// lazily returns a Conn at once and reports Unavailable or Timeout from its
// calls.
//
// Options (WithMiddleware, WithFactory) apply as in NewServer; the
// middlewares see the implementation's name, address and root in their
// ConnInfo.
func OpenServerContext(ctx context.Context, implementation, serverAddress, root string, opts ...ServerOption) (*Server, error) {
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	f := cfg.factory
	if f == nil {
		var err error
		if f, err = GetFactory(implementation); err != nil {
			return nil, err
		}
	}
	conn, err := createConn(ctx, f, GlobalCell, serverAddress, root)
	if err != nil {
		return nil, err
	}
	all := append([]ServerOption{withGlobalInfo(implementation, serverAddress, root)}, opts...)
	return NewServer(f, conn, all...), nil
}

// ServerOption configures a Server (NewServer, OpenServer).
type ServerOption func(*serverConfig)

type serverConfig struct {
	info    ConnInfo // of the global cell
	mws     []Middleware
	factory Factory // WithFactory; nil when not given
}

// WithFactory makes the Server open its connections with f: OpenServer and
// OpenServerContext open the global cell with it instead of the factory
// registered under the implementation's name (which then only names the
// backend in the middlewares' ConnInfo, and need not be registered), and
// ConnForCell opens every cell from its CellInfo record with it. This is
// how a Server over a store that needs TLS, credentials or other options
// opens every cell with them: pass the backend's configured Factory (for
// example a zk2topo.Factory with its Options, or consultopo.NewFactory(opts)).
// For NewServer, f replaces the factory argument. A nil f is ignored; the
// last WithFactory wins.
func WithFactory(f Factory) ServerOption {
	return func(c *serverConfig) {
		if f != nil {
			c.factory = f
		}
	}
}

// WithMiddleware decorates every connection of the Server with mws (see
// Decorate; the first is outermost): the global cell's, and every cell
// connection ConnForCell opens, including cells opened later. The
// Server's own reads and writes of CellInfo records go through the global
// cell's decorators too. Several WithMiddleware options add up, in order.
func WithMiddleware(mws ...Middleware) ServerOption {
	return func(c *serverConfig) { c.mws = append(c.mws, mws...) }
}

// WithImplementationName names the backend in the ConnInfo the Server's
// middlewares see (OpenServer sets it; NewServer cannot know it).
func WithImplementationName(name string) ServerOption {
	return func(c *serverConfig) { c.info.Implementation = name }
}

func withGlobalInfo(implementation, serverAddress, root string) ServerOption {
	return func(c *serverConfig) {
		c.info = ConnInfo{Implementation: implementation, ServerAddress: serverAddress, Root: root}
	}
}

// NewServer returns a Server over an open global-cell connection; factory
// opens the other cells. The Server owns global and closes it in Close.
// It logs (at most one record per watch failure) through slog.Default().
//
// With WithMiddleware, global and every cell connection are decorated
// (Decorate); without it, connections are used as they are. WithFactory
// replaces factory.
func NewServer(factory Factory, global Conn, opts ...ServerOption) *Server {
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	cfg.info.Cell = GlobalCell
	if cfg.factory != nil {
		factory = cfg.factory
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		global:  Decorate(cfg.info, global, cfg.mws...),
		factory: factory,
		impl:    cfg.info.Implementation,
		mws:     cfg.mws,
		log:     slog.Default().With("component", "topo.Server"),
		ctx:     ctx,
		cancel:  cancel,
		cells:   map[string]*cellConn{},
		epochs:  map[string]uint64{},
	}
}

// GlobalCell returns the connection to the global cell.
func (s *Server) GlobalCell() Conn { return s.global }

func checkCellName(cell string) error {
	if cell == "" || strings.ContainsRune(cell, '/') {
		return &Error{Code: InvalidArgument, Path: cell, Err: errors.New("a cell name must be one non-empty path segment")}
	}
	_, err := CleanFilePath(cell)
	return err
}

// ConnForCell returns the connection to cell, dialling it from its CellInfo
// record on first use and caching it; GlobalCell returns the global
// connection. The Server type's documentation describes how the cache
// follows the record.
//
// It honours ctx: a cached, followed cell is returned without a store call;
// otherwise the watch of the record is opened with its setup bounded by ctx
// (the watch itself then lives as long as the cached connection), and the
// dial (Factory.Create, which takes no context) is waited for until ctx
// ends, so that with a hung or partitioned global store a deadline returns
// Timeout (a cancellation Interrupted) as soon as it passes. A dial
// abandoned that way completes in the background and is then cached (or
// closed if the cell was cached meanwhile). A dial that was in flight when
// this Server's UpdateCellInfoFields or DeleteCellInfo changed the cell's
// record is not cached either (it may have read the record from before):
// the call reads the record again. A ContextFactory's
// CreateContext is given ctx instead, so its dial ends with ctx and nothing
// is cached. It returns NoNode when the cell
// has no CellInfo, InvalidArgument for a malformed cell name or an
// undecodable record, the factory's error when the dial fails (nothing is
// cached then), the global store's error when the record cannot be watched
// (PermissionDenied, Unavailable, ...), Timeout or Interrupted for ctx, and
// Closed after Close. Safe for concurrent use; concurrent first calls may
// dial more than once, but all of them return the one connection that is
// cached. The connection is shared and owned by the Server: callers must
// not Close it (every later caller would get the closed one); Server.Close
// closes it.
func (s *Server) ConnForCell(ctx context.Context, cell string) (Conn, error) {
	if cell == GlobalCell {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return nil, NewError(Closed, cell)
		}
		return s.global, nil
	}
	if err := checkCellName(cell); err != nil {
		return nil, err
	}
	if err := checkContext(ctx, cell); err != nil {
		return nil, err
	}
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, NewError(Closed, cell)
		}
		cc := s.cells[cell]
		if cc != nil && cc.following {
			s.mu.Unlock()
			return cc.conn, nil
		}
		epoch := s.epochs[cell]
		s.mu.Unlock()

		// The watch lives as long as the connection it will follow: cc's,
		// or a new one's.
		life, endLife := context.Context(nil), context.CancelFunc(func() {})
		if cc != nil {
			life = cc.ctx
		} else {
			life, endLife = context.WithCancel(s.ctx)
		}
		current, changes, stopWatch, err := s.watchRecord(ctx, life, cell)
		if err != nil {
			endLife()
			if cc != nil && IsErrType(err, NoNode) {
				s.retire(cc) // deleted while nobody watched it
			}
			if s.ctx.Err() != nil {
				return nil, NewError(Closed, cell)
			}
			if cc != nil && cc.ctx.Err() != nil && ctx.Err() == nil {
				continue // cc was retired under the watch: look again
			}
			return nil, err
		}
		ci := &topodatapb.CellInfo{}
		if uerr := proto.Unmarshal(current.Contents, ci); uerr != nil {
			stopWatch()
			drain(changes)
			endLife()
			if cc != nil {
				s.retire(cc)
			}
			return nil, &Error{Code: InvalidArgument, Path: CellInfoPath(cell), Err: uerr}
		}
		if cc != nil {
			endLife() // a no-op: life is cc's
			if cc.matches(ci) && s.refollow(cc, changes, stopWatch) {
				return cc.conn, nil
			}
			// The record changed while nobody watched it (or cc was
			// retired meanwhile): drop it and look again.
			stopWatch()
			drain(changes)
			s.retire(cc)
			continue
		}
		conn, err := s.dial(ctx, cell, ci, &cellWatch{life: life, endLife: endLife, changes: changes, stop: stopWatch}, epoch)
		if errors.Is(err, errRecordChanged) {
			continue // this Server changed the record during the dial: read it again
		}
		return conn, err
	}
}

// errRecordChanged is install's answer when this Server changed the cell's
// record since the dial began.
var errRecordChanged = errors.New("the cell's record was changed during the dial")

// watchRecord opens a watch of cell's record that lives until life ends or
// stop is called, with its setup bounded by ctx: if ctx ends before the
// watch is established, the watch is abandoned and ctx's Timeout or
// Interrupted returned.
func (s *Server) watchRecord(ctx, life context.Context, cell string) (*WatchData, <-chan *WatchData, context.CancelFunc, error) {
	wctx, stop := context.WithCancel(life)
	detach := context.AfterFunc(ctx, stop)
	current, changes, err := s.global.Watch(wctx, CellInfoPath(cell))
	if !detach() {
		// ctx ended during the setup (and cancelled the watch).
		stop()
		drain(changes)
		return nil, nil, nil, fromContext(ctx, CellInfoPath(cell))
	}
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return current, changes, stop, nil
}

// cellWatch is an established watch of a record, handed from ConnForCell to
// the connection that follows it.
type cellWatch struct {
	life    context.Context    // the watch's lifetime, to become the cellConn's
	endLife context.CancelFunc // ends life
	changes <-chan *WatchData
	stop    context.CancelFunc // ends the watch alone
}

// discard ends w and everything under its lifetime.
func (w *cellWatch) discard() {
	w.stop()
	drain(w.changes)
	w.endLife()
}

// dial opens cell from ci, waiting for the factory until ctx ends, and
// caches the result, to be followed through w, unless this Server changed
// the record since epoch (see install).
func (s *Server) dial(ctx context.Context, cell string, ci *topodatapb.CellInfo, w *cellWatch, epoch uint64) (Conn, error) {
	type result struct {
		conn Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var conn Conn
		var err error
		if cf, ok := s.factory.(ContextFactory); ok {
			conn, err = cf.CreateContext(ctx, cell, ci.GetServerAddress(), ci.GetRoot())
		} else {
			conn, err = s.factory.Create(cell, ci.GetServerAddress(), ci.GetRoot())
		}
		if err != nil {
			w.discard()
			done <- result{nil, err}
			return
		}
		conn = Decorate(ConnInfo{Implementation: s.impl, Cell: cell, ServerAddress: ci.GetServerAddress(), Root: ci.GetRoot()}, conn, s.mws...)
		conn, err = s.install(cell, ci, conn, w, epoch)
		done <- result{conn, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		return nil, fromContext(ctx, cell)
	}
}

// install caches conn, dialled from ci and to be followed through w, unless
// the cell was cached meanwhile: then conn and w are closed and the cached
// connection returned. When this Server changed or deleted the record
// since epoch (UpdateCellInfoFields, DeleteCellInfo), ci may be the record
// from before, which those promise no later ConnForCell returns: conn and
// w are closed and errRecordChanged returned.
func (s *Server) install(cell string, ci *topodatapb.CellInfo, conn Conn, w *cellWatch, epoch uint64) (Conn, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.discard()
		conn.Close()
		return nil, NewError(Closed, cell)
	}
	if s.epochs[cell] != epoch {
		s.mu.Unlock()
		w.discard()
		conn.Close()
		return nil, errRecordChanged
	}
	if other, ok := s.cells[cell]; ok {
		// Another caller dialled first; keep theirs (its watch checks it
		// against the record).
		s.mu.Unlock()
		w.discard()
		conn.Close()
		return other.conn, nil
	}
	cc := &cellConn{cell: cell, addr: ci.GetServerAddress(), root: ci.GetRoot(), conn: conn,
		ctx: w.life, cancel: w.endLife, following: true}
	s.cells[cell] = cc
	s.mu.Unlock()
	go s.follow(cc, w.changes, w.stop)
	return conn, nil
}

// refollow makes the watch changes (ended by stop) follow cc's record again
// after a permanent watch failure. It returns false when cc is no longer
// cached; when another caller already re-established a watch, it ends this
// one and returns true.
func (s *Server) refollow(cc *cellConn, changes <-chan *WatchData, stop context.CancelFunc) bool {
	s.mu.Lock()
	if s.closed || s.cells[cc.cell] != cc {
		s.mu.Unlock()
		return false
	}
	if cc.following {
		s.mu.Unlock()
		stop()
		drain(changes)
		return true
	}
	cc.following = true
	s.mu.Unlock()
	go s.follow(cc, changes, stop)
	return true
}

// unfollow records that nobody watches cc's record any more.
func (s *Server) unfollow(cc *cellConn) {
	s.mu.Lock()
	if s.cells[cc.cell] == cc {
		cc.following = false
	}
	s.mu.Unlock()
}

// retire drops cc from the cache (if it is still there) and closes it.
func (s *Server) retire(cc *cellConn) {
	s.mu.Lock()
	if s.cells[cc.cell] == cc {
		delete(s.cells, cc.cell)
	}
	s.mu.Unlock()
	cc.closeConn()
}

// retireCell retires the cached connection of cell, if any.
func (s *Server) retireCell(cell string) {
	s.mu.Lock()
	cc := s.cells[cell]
	s.mu.Unlock()
	if cc != nil {
		s.retire(cc)
	}
}

// follow follows cc's record through the established watch changes (ended
// by stop), and through new watches when one fails, until the record
// changes or is deleted (then it retires cc), cc is retired or the Server
// closes (then it just returns), or a watch fails permanently (then it
// marks cc unfollowed). Transient failures are retried with backoff; they
// never close cc.
func (s *Server) follow(cc *cellConn, changes <-chan *WatchData, stop context.CancelFunc) {
	p := CellInfoPath(cc.cell)
	b := newRetryBackoff(cellWatchInitialBackoff, cellWatchMaxBackoff)
	for {
		started := time.Now()
		err := s.followChanges(cc, changes)
		stop()
		if err == nil {
			return // retired
		}
		// A watch that lived long was healthy: retry its failure quickly.
		// One that failed at once keeps backing off, so a store whose
		// watches keep breaking is not hammered.
		if time.Since(started) > cellWatchMaxBackoff {
			b.reset()
		}
		for {
			if cc.ctx.Err() != nil {
				return
			}
			if IsPermanent(err) {
				s.log.Warn("giving up the watch of a CellInfo record; the cell connection stays open and each ConnForCell tries the watch again",
					"cell", cc.cell, "err", err)
				s.unfollow(cc)
				return
			}
			s.log.Warn("the watch of a CellInfo record failed; watching again", "cell", cc.cell, "err", err)
			if b.wait(cc.ctx, p) != nil {
				return
			}
			var current *WatchData
			current, changes, stop, err = s.watchRecord(cc.ctx, cc.ctx, cc.cell)
			if cc.ctx.Err() != nil {
				if err == nil {
					stop()
					drain(changes)
				}
				return
			}
			if IsErrType(err, NoNode) {
				s.retire(cc)
				return
			}
			if err == nil {
				if !cc.matchesData(current.Contents) {
					stop()
					drain(changes)
					s.retire(cc)
					return
				}
				break
			}
		}
	}
}

// followChanges reads one watch's changes. It returns nil once it retired
// cc (the record changed or was deleted), and otherwise the error the watch
// ended with (Unavailable if it ended without one).
func (s *Server) followChanges(cc *cellConn, changes <-chan *WatchData) error {
	for wd := range changes {
		switch {
		case wd.Err == nil && cc.matchesData(wd.Contents):
			continue
		case wd.Err == nil, IsErrType(wd.Err, NoNode):
			s.retire(cc)
			drain(changes)
			return nil
		default:
			drain(changes)
			return wd.Err
		}
	}
	return NewError(Unavailable, CellInfoPath(cc.cell))
}

func drain(ch <-chan *WatchData) {
	if ch == nil {
		return
	}
	go func() {
		for range ch {
		}
	}()
}

// CreateCellInfo stores the CellInfo record of a new cell. It is
// idempotent: when the cell already has a record equal to ci (proto.Equal),
// it returns nil without writing, so a caller may retry it after a Timeout;
// when the record differs (or does not decode) it returns NodeExists. It
// returns NodeExists with a *CellsAliasConflictError when a cells alias has
// the cell's name (checked before the write and again after it, as in
// CreateCellsAlias: a record created while a racing CreateCellsAlias of
// that name wrote is removed again), InvalidArgument for a malformed cell
// name, for GlobalCell or a nil ci, and the store's error otherwise.
func (s *Server) CreateCellInfo(ctx context.Context, cell string, ci *topodatapb.CellInfo) error {
	if err := checkRecordCell(cell); err != nil {
		return err
	}
	p := CellInfoPath(cell)
	if ci == nil {
		return &Error{Code: InvalidArgument, Path: p, Err: errors.New("nil CellInfo")}
	}
	data, err := proto.Marshal(ci)
	if err != nil {
		return &Error{Code: InvalidArgument, Path: p, Err: err}
	}
	if err := s.cellNameConflict(ctx, cell); err != nil {
		return err
	}
	v, err := s.global.Create(ctx, p, data)
	if IsErrType(err, NodeExists) {
		if cur, _, gerr := s.getCellInfo(ctx, cell); gerr == nil && proto.Equal(cur, ci) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	return s.undoCellOnConflict(ctx, cell, v)
}

// checkRecordCell checks that cell may have a CellInfo record written: a
// valid cell name other than GlobalCell.
func checkRecordCell(cell string) error {
	if err := checkCellName(cell); err != nil {
		return err
	}
	if cell == GlobalCell {
		return &Error{Code: InvalidArgument, Path: cell, Err: errors.New("the global cell has no CellInfo")}
	}
	return nil
}

// cellNameConflict returns the NodeExists conflict when a cells alias is
// named cell, nil when none is, and the store's error otherwise.
func (s *Server) cellNameConflict(ctx context.Context, cell string) error {
	_, _, err := s.global.Get(ctx, CellsAliasPath(cell))
	switch {
	case err == nil:
		return conflict(CellInfoPath(cell), &CellsAliasConflictError{Alias: cell, Cell: cell})
	case IsErrType(err, NoNode):
		return nil
	}
	return err
}

// undoCellOnConflict checks, after cell's record was created at version v,
// that no cells alias of that name was created meanwhile; if one was, it
// deletes the record again (unless rewritten since) and returns the
// conflict.
func (s *Server) undoCellOnConflict(ctx context.Context, cell string, v Version) error {
	cerr := s.cellNameConflict(ctx, cell)
	if !IsErrType(cerr, NodeExists) {
		return cerr
	}
	if err := s.global.Delete(context.WithoutCancel(ctx), CellInfoPath(cell), v); err != nil && !IsErrType(err, BadVersion) && !IsErrType(err, NoNode) {
		s.log.Warn("could not undo a CellInfo write that a concurrent cells alias made conflicting", "cell", cell, "err", err)
	}
	return cerr
}

// GetCellInfo reads cell's CellInfo record. It returns NoNode when the cell
// has none, and InvalidArgument when the record does not decode.
func (s *Server) GetCellInfo(ctx context.Context, cell string) (*topodatapb.CellInfo, error) {
	ci, _, err := s.getCellInfo(ctx, cell)
	return ci, err
}

func (s *Server) getCellInfo(ctx context.Context, cell string) (*topodatapb.CellInfo, Version, error) {
	if err := checkCellName(cell); err != nil {
		return nil, nil, err
	}
	ci := &topodatapb.CellInfo{}
	v, err := s.getRecord(ctx, CellInfoPath(cell), ci)
	if err != nil {
		return nil, nil, err
	}
	return ci, v, nil
}

// getRecord reads the global cell's file p into m, returning its version:
// the store's error (NoNode when absent), or InvalidArgument when the bytes
// do not decode as m.
func (s *Server) getRecord(ctx context.Context, p string, m proto.Message) (Version, error) {
	data, v, err := s.global.Get(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(data, m); err != nil {
		return nil, &Error{Code: InvalidArgument, Path: p, Err: err}
	}
	return v, nil
}

// UpdateCellInfoFields reads cell's CellInfo (an empty one if absent), lets
// update change it, and writes it back with compare-and-set, retrying when a
// concurrent writer wins (BadVersion, or NodeExists for an absent record).
// Retries after the first back off (5 ms doubling up to 1 s, with jitter),
// so a store that keeps reporting lost races never makes it spin; ctx bounds
// the whole loop (Timeout or Interrupted). If update returns an error that
// IsErrType NoUpdateNeeded, nothing is written and nil is returned; any
// other error from update is returned as is. Creating an absent record for
// a cell named like a cells alias returns NodeExists with a
// *CellsAliasConflictError (as CreateCellInfo). Every other store error,
// PermissionDenied included, is returned at once without a retry. Once the
// write changed the record's server address or root, the cell's cached
// connection (if any) is closed before it returns, so that the next
// ConnForCell dials the new record. It returns InvalidArgument, without
// calling update, for a malformed cell name and for GlobalCell (which has
// no CellInfo, as in CreateCellInfo).
func (s *Server) UpdateCellInfoFields(ctx context.Context, cell string, update func(*topodatapb.CellInfo) error) error {
	if err := checkRecordCell(cell); err != nil {
		return err
	}
	p := CellInfoPath(cell)
	b := newRetryBackoff(5*time.Millisecond, time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 1 {
			if err := b.wait(ctx, p); err != nil {
				return err
			}
		}
		if err := checkContext(ctx, p); err != nil {
			return err
		}
		ci, v, err := s.getCellInfo(ctx, cell)
		switch {
		case IsErrType(err, NoNode):
			ci, v = &topodatapb.CellInfo{}, nil
		case err != nil:
			return err
		}
		if err := update(ci); err != nil {
			if IsErrType(err, NoUpdateNeeded) {
				return nil
			}
			return err
		}
		data, err := proto.Marshal(ci)
		if err != nil {
			return &Error{Code: InvalidArgument, Path: p, Err: err}
		}
		var nv Version
		if v == nil {
			if cerr := s.cellNameConflict(ctx, cell); cerr != nil {
				return cerr
			}
			nv, err = s.global.Create(ctx, p, data)
		} else {
			_, err = s.global.Update(ctx, p, data, v)
		}
		if IsErrType(err, NodeExists) || IsErrType(err, BadVersion) {
			continue
		}
		if err == nil && v == nil {
			if cerr := s.undoCellOnConflict(ctx, cell, nv); cerr != nil {
				return cerr
			}
		}
		if err == nil {
			s.mu.Lock()
			s.epochs[cell]++
			cc := s.cells[cell]
			s.mu.Unlock()
			if cc != nil && !cc.matches(ci) {
				s.retire(cc)
			}
		}
		return err
	}
}

// DeleteCellInfo deletes cell's CellInfo record and closes its cached
// connection (before it returns). It returns NoNode when the cell has none,
// InvalidArgument for a malformed cell name, and the store's error (for
// example PermissionDenied) otherwise.
func (s *Server) DeleteCellInfo(ctx context.Context, cell string) error {
	if err := checkCellName(cell); err != nil {
		return err
	}
	if err := s.global.Delete(ctx, CellInfoPath(cell), nil); err != nil {
		return err
	}
	s.mu.Lock()
	s.epochs[cell]++
	s.mu.Unlock()
	s.retireCell(cell)
	return nil
}

// GetCellInfoNames returns the names of the cells that have a CellInfo
// record, sorted; an empty list (and no error) when there are none.
func (s *Server) GetCellInfoNames(ctx context.Context) ([]string, error) {
	entries, err := s.global.ListDir(ctx, CellsPath, false)
	if IsErrType(err, NoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name)
	}
	return names, nil
}

// Close stops watching the CellInfo records and closes every cached cell
// connection and the global connection. Later ConnForCell calls return
// Closed; a dial still in flight is closed when it completes. Close does
// not wait for the background watches to return. It is idempotent and safe
// for concurrent use.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	cells := s.cells
	s.cells = map[string]*cellConn{}
	s.mu.Unlock()
	s.cancel()
	for _, cc := range cells {
		cc.closeConn()
	}
	s.global.Close()
}
