package topo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"

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
type Server struct {
	global  Conn
	factory Factory

	mu     sync.Mutex
	cells  map[string]*cellConn
	closed bool
}

type cellConn struct {
	info   []byte // the CellInfo bytes the conn was dialled from
	conn   Conn
	cancel context.CancelFunc
}

// OpenServer opens the global cell of a topology stored by the factory
// registered as implementation, at serverAddress under root. It returns
// NoImplementation (naming the registered factories) for an unknown
// implementation, and the factory's error if it cannot open the connection.
func OpenServer(implementation, serverAddress, root string) (*Server, error) {
	f, err := GetFactory(implementation)
	if err != nil {
		return nil, err
	}
	conn, err := f.Create(GlobalCell, serverAddress, root)
	if err != nil {
		return nil, err
	}
	return NewServer(f, conn), nil
}

// NewServer returns a Server over an open global-cell connection; factory
// opens the other cells. The Server owns global and closes it in Close.
func NewServer(factory Factory, global Conn) *Server {
	return &Server{global: global, factory: factory, cells: map[string]*cellConn{}}
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
// record on first use and caching it. The cache follows the record: when it
// changes or is deleted, the cached connection is closed and the next call
// dials anew. GlobalCell returns the global connection. It returns NoNode
// when the cell has no CellInfo, InvalidArgument for a malformed cell name,
// and Closed after Close.
func (s *Server) ConnForCell(ctx context.Context, cell string) (Conn, error) {
	if cell == GlobalCell {
		return s.global, nil
	}
	if err := checkCellName(cell); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, NewError(Closed, cell)
	}
	if cc, ok := s.cells[cell]; ok {
		s.mu.Unlock()
		return cc.conn, nil
	}
	s.mu.Unlock()

	wctx, cancel := context.WithCancel(context.Background())
	current, changes, err := s.global.Watch(wctx, CellInfoPath(cell))
	if err != nil {
		cancel()
		return nil, err
	}
	ci := &topodatapb.CellInfo{}
	if err := proto.Unmarshal(current.Contents, ci); err != nil {
		cancel()
		drain(changes)
		return nil, &Error{Code: InvalidArgument, Path: CellInfoPath(cell), Err: err}
	}
	conn, err := s.factory.Create(cell, ci.GetServerAddress(), ci.GetRoot())
	if err != nil {
		cancel()
		drain(changes)
		return nil, err
	}
	cc := &cellConn{info: current.Contents, conn: conn, cancel: cancel}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		cancel()
		drain(changes)
		conn.Close()
		return nil, NewError(Closed, cell)
	}
	if other, ok := s.cells[cell]; ok {
		// Another caller dialled first; keep theirs.
		s.mu.Unlock()
		cancel()
		drain(changes)
		conn.Close()
		return other.conn, nil
	}
	s.cells[cell] = cc
	s.mu.Unlock()
	go s.followCellInfo(cell, cc, changes)
	return conn, nil
}

// followCellInfo drops cc from the cache once its CellInfo changes, is
// deleted, or its watch ends for any reason.
func (s *Server) followCellInfo(cell string, cc *cellConn, changes <-chan *WatchData) {
	for wd := range changes {
		if wd.Err == nil && bytes.Equal(wd.Contents, cc.info) {
			continue
		}
		break
	}
	cc.cancel()
	s.mu.Lock()
	if s.cells[cell] == cc {
		delete(s.cells, cell)
	}
	s.mu.Unlock()
	cc.conn.Close()
	drain(changes)
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

// CreateCellInfo stores the CellInfo record of a new cell. It returns
// NodeExists if the cell already has one, and InvalidArgument for a
// malformed cell name or for GlobalCell.
func (s *Server) CreateCellInfo(ctx context.Context, cell string, ci *topodatapb.CellInfo) error {
	if err := checkCellName(cell); err != nil {
		return err
	}
	if cell == GlobalCell {
		return &Error{Code: InvalidArgument, Path: cell, Err: errors.New("the global cell has no CellInfo")}
	}
	data, err := proto.Marshal(ci)
	if err != nil {
		return &Error{Code: InvalidArgument, Path: CellInfoPath(cell), Err: err}
	}
	_, err = s.global.Create(ctx, CellInfoPath(cell), data)
	return err
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
	data, v, err := s.global.Get(ctx, CellInfoPath(cell))
	if err != nil {
		return nil, nil, err
	}
	ci := &topodatapb.CellInfo{}
	if err := proto.Unmarshal(data, ci); err != nil {
		return nil, nil, &Error{Code: InvalidArgument, Path: CellInfoPath(cell), Err: err}
	}
	return ci, v, nil
}

// UpdateCellInfoFields reads cell's CellInfo (an empty one if absent), lets
// update change it, and writes it back with compare-and-set, retrying when a
// concurrent writer wins. If update returns an error that IsErrType
// NoUpdateNeeded, nothing is written and nil is returned; any other error
// from update is returned as is.
func (s *Server) UpdateCellInfoFields(ctx context.Context, cell string, update func(*topodatapb.CellInfo) error) error {
	for {
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
			return &Error{Code: InvalidArgument, Path: CellInfoPath(cell), Err: err}
		}
		if v == nil {
			_, err = s.global.Create(ctx, CellInfoPath(cell), data)
		} else {
			_, err = s.global.Update(ctx, CellInfoPath(cell), data, v)
		}
		if IsErrType(err, NodeExists) || IsErrType(err, BadVersion) {
			continue
		}
		return err
	}
}

// DeleteCellInfo deletes cell's CellInfo record and closes its cached
// connection. It returns NoNode when the cell has none.
func (s *Server) DeleteCellInfo(ctx context.Context, cell string) error {
	if err := checkCellName(cell); err != nil {
		return err
	}
	return s.global.Delete(ctx, CellInfoPath(cell), nil)
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

// Close closes every cached cell connection and the global connection.
// Later ConnForCell calls return Closed. Close is idempotent.
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
	for _, cc := range cells {
		cc.cancel()
		cc.conn.Close()
	}
	s.global.Close()
}
