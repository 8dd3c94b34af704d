package topo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
)

// CellsAliasesPath is the directory of the global cell that holds one
// <alias>/CellsAlias record per cells alias (the same layout as Vitess).
const CellsAliasesPath = "cells_aliases"

// CellsAliasFile is the name of an alias's record under
// CellsAliasesPath/<alias>/.
const CellsAliasFile = "CellsAlias"

// CellsAliasPath returns the global-cell path of alias's CellsAlias record.
func CellsAliasPath(alias string) string {
	return CellsAliasesPath + "/" + alias + "/" + CellsAliasFile
}

// CellsAliasConflictError is the cause of the NodeExists *Error that the
// cells alias methods (and CreateCellInfo) return when a write would break
// the rules of cells aliases, which are Vitess's: a cell belongs to at most
// one alias, and an alias does not have the name of a cell. GetAliasForCell
// returns it too when the store already breaks the first rule (a record
// written by another tool, or by two writers racing; see CreateCellsAlias).
// Find it with errors.As.
type CellsAliasConflictError struct {
	// Alias is the alias being written ("" for GetAliasForCell).
	Alias string
	// Cell is the cell that would belong to two aliases, or the cell whose
	// name is the alias's.
	Cell string
	// Aliases are the other aliases Cell belongs to, sorted; empty when the
	// conflict is between an alias's name and a cell's.
	Aliases []string
}

// Error describes the conflict.
func (e *CellsAliasConflictError) Error() string {
	switch {
	case len(e.Aliases) == 0:
		return fmt.Sprintf("cells alias %q has the name of a cell", e.Alias)
	case e.Alias == "":
		return fmt.Sprintf("cell %q belongs to more than one cells alias: %s", e.Cell, strings.Join(e.Aliases, ", "))
	default:
		return fmt.Sprintf("cell %q of cells alias %q already belongs to cells alias %s", e.Cell, e.Alias, strings.Join(e.Aliases, ", "))
	}
}

func conflict(path string, e *CellsAliasConflictError) error {
	return &Error{Code: NodeExists, Path: path, Err: e}
}

// checkAliasName applies the cell-name rules to an alias name: one
// non-empty path segment, not GlobalCell, not reserved.
func checkAliasName(alias string) error {
	if err := checkCellName(alias); err != nil {
		return err
	}
	if alias == GlobalCell {
		return &Error{Code: InvalidArgument, Path: alias, Err: errors.New("a cells alias cannot be named after the global cell")}
	}
	return checkReserved(CellsAliasPath(alias))
}

// checkCellsAlias validates the cells of a record: each a valid cell name
// other than GlobalCell.
func checkCellsAlias(alias string, ca *topodatapb.CellsAlias) error {
	if ca == nil {
		return &Error{Code: InvalidArgument, Path: CellsAliasPath(alias), Err: errors.New("nil CellsAlias")}
	}
	for _, c := range ca.GetCells() {
		if err := checkCellName(c); err != nil {
			return &Error{Code: InvalidArgument, Path: CellsAliasPath(alias), Err: fmt.Errorf("cell %q: %w", c, err)}
		}
		if c == GlobalCell {
			return &Error{Code: InvalidArgument, Path: CellsAliasPath(alias), Err: errors.New("the global cell cannot belong to a cells alias")}
		}
	}
	return nil
}

// GetCellsAliases returns every cells alias, by name; an empty map (and no
// error) when there are none. It reads them with one List of
// CellsAliasesPath, so on etcd and memorytopo the result is one consistent
// snapshot. Files under CellsAliasesPath other than <alias>/CellsAlias are
// ignored, and so are foreign files at reserved paths (List's
// PartialResult). It returns InvalidArgument naming the record when one
// does not decode, and the store's error otherwise. Safe for concurrent use.
func (s *Server) GetCellsAliases(ctx context.Context) (map[string]*topodatapb.CellsAlias, error) {
	kvs, err := s.global.List(ctx, CellsAliasesPath+"/")
	var rf *ReservedFilesError
	switch {
	case IsErrType(err, NoNode):
		return map[string]*topodatapb.CellsAlias{}, nil
	case IsErrType(err, PartialResult) && errors.As(err, &rf):
		// Foreign files at reserved paths are not aliases; the rest is whole.
	case err != nil:
		return nil, err
	}
	out := make(map[string]*topodatapb.CellsAlias, len(kvs))
	for _, kv := range kvs {
		name, ok := strings.CutPrefix(kv.Path, CellsAliasesPath+"/")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, "/"+CellsAliasFile)
		if !ok || name == "" || strings.Contains(name, "/") {
			continue
		}
		ca := &topodatapb.CellsAlias{}
		if err := proto.Unmarshal(kv.Value, ca); err != nil {
			return nil, &Error{Code: InvalidArgument, Path: kv.Path, Err: err}
		}
		out[name] = ca
	}
	return out, nil
}

// GetCellsAliasNames returns the names of the cells aliases, sorted; an
// empty list (and no error) when there are none. Errors as GetCellsAliases.
func (s *Server) GetCellsAliasNames(ctx context.Context) ([]string, error) {
	all, err := s.GetCellsAliases(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// GetCellsAlias reads alias's record. It returns NoNode when there is no
// such alias, InvalidArgument for a malformed name or an undecodable
// record, and the store's error otherwise.
func (s *Server) GetCellsAlias(ctx context.Context, alias string) (*topodatapb.CellsAlias, error) {
	ca, _, err := s.getCellsAlias(ctx, alias)
	return ca, err
}

func (s *Server) getCellsAlias(ctx context.Context, alias string) (*topodatapb.CellsAlias, Version, error) {
	if err := checkAliasName(alias); err != nil {
		return nil, nil, err
	}
	ca := &topodatapb.CellsAlias{}
	v, err := s.getRecord(ctx, CellsAliasPath(alias), ca)
	if err != nil {
		return nil, nil, err
	}
	return ca, v, nil
}

// aliasConflict checks ca, to be stored as alias, against the other aliases
// (a cell in two aliases) and the cells (alias named like a cell). It
// returns the NodeExists conflict, nil, or the store's error.
func (s *Server) aliasConflict(ctx context.Context, alias string, ca *topodatapb.CellsAlias) error {
	p := CellsAliasPath(alias)
	if _, _, err := s.global.Get(ctx, CellInfoPath(alias)); err == nil {
		return conflict(p, &CellsAliasConflictError{Alias: alias, Cell: alias})
	} else if !IsErrType(err, NoNode) {
		return err
	}
	all, err := s.GetCellsAliases(ctx)
	if err != nil {
		return err
	}
	for _, c := range ca.GetCells() {
		var others []string
		for name, other := range all {
			if name != alias && slices.Contains(other.GetCells(), c) {
				others = append(others, name)
			}
		}
		if len(others) > 0 {
			sort.Strings(others)
			return conflict(p, &CellsAliasConflictError{Alias: alias, Cell: c, Aliases: others})
		}
	}
	return nil
}

// writeAlias writes ca as alias (Create when prev is nil, else a
// compare-and-set against prev), then checks the rules again and, when a
// concurrent writer broke them meanwhile, undoes its own write (only if
// nobody wrote the record since) and returns the conflict. A store error of
// the write itself is returned as is, for the caller to retry on
// BadVersion or NodeExists.
func (s *Server) writeAlias(ctx context.Context, alias string, ca *topodatapb.CellsAlias, prevData []byte, prev Version) (storeErr, ruleErr error) {
	p := CellsAliasPath(alias)
	data, err := proto.Marshal(ca)
	if err != nil {
		return nil, &Error{Code: InvalidArgument, Path: p, Err: err}
	}
	var v Version
	if prev == nil {
		v, err = s.global.Create(ctx, p, data)
	} else {
		v, err = s.global.Update(ctx, p, data, prev)
	}
	if err != nil {
		return err, nil
	}
	// Two writers that checked the rules at the same time may both have
	// written. The later of the two writes is followed by a check that sees
	// the earlier one, so at most one of them stays.
	cerr := s.aliasConflict(ctx, alias, ca)
	if cerr == nil || !IsErrType(cerr, NodeExists) {
		return nil, cerr
	}
	undo := context.WithoutCancel(ctx)
	if prev == nil {
		err = s.global.Delete(undo, p, v)
	} else {
		_, err = s.global.Update(undo, p, prevData, v)
	}
	if err != nil && !IsErrType(err, BadVersion) && !IsErrType(err, NoNode) {
		s.log.Warn("could not undo a cells alias write that a concurrent writer made conflicting", "alias", alias, "err", err)
	}
	return nil, cerr
}

// CreateCellsAlias stores the record of a new cells alias. It is
// idempotent: when the alias exists with a record equal to ca
// (proto.Equal), it returns nil without writing. Vitess's rules apply: it
// returns NodeExists when the alias exists with another record, and
// NodeExists with a
// *CellsAliasConflictError when one of ca's cells already belongs to
// another alias or when a cell has the alias's name. It returns
// InvalidArgument for a malformed alias or cell name (GlobalCell included)
// or a nil ca, and the store's error otherwise; nothing is written then.
// The cells need not have a CellInfo.
//
// The rules are checked before the write and again after it: when two
// writers (topokit Servers, in this or other processes) race to put one
// cell in two aliases, the check after the later write sees the earlier
// one and that writer removes its own record again and returns the
// conflict, so at most one of the records stays (both may be refused).
// Until then, for a moment, both records exist. On stores whose reads can
// lag a write made through another client (ZooKeeper, Consul's default
// consistency), the check after the write can miss a racing write. Vitess
// itself checks only before writing.
func (s *Server) CreateCellsAlias(ctx context.Context, alias string, ca *topodatapb.CellsAlias) error {
	if err := checkAliasName(alias); err != nil {
		return err
	}
	if err := checkCellsAlias(alias, ca); err != nil {
		return err
	}
	if err := s.aliasConflict(ctx, alias, ca); err != nil {
		return err
	}
	storeErr, ruleErr := s.writeAlias(ctx, alias, ca, nil, nil)
	if IsErrType(storeErr, NodeExists) {
		// Idempotent: the same record (say, from a retried call whose
		// write landed) is success.
		if cur, _, err := s.getCellsAlias(ctx, alias); err == nil && proto.Equal(cur, ca) {
			return nil
		}
	}
	if storeErr != nil {
		return storeErr
	}
	return ruleErr
}

// UpdateCellsAlias reads alias's record (an empty one if absent), lets
// update change it, checks the result against the rules of
// CreateCellsAlias (the alias's own current cells do not count as a
// conflict) and writes it back with compare-and-set, retrying when a
// concurrent writer wins (BadVersion, or NodeExists for an absent record)
// with backoff (5 ms doubling up to 1 s, with jitter); ctx bounds the whole
// loop (Timeout or Interrupted). If update returns an error that IsErrType
// NoUpdateNeeded, nothing is written and nil is returned; any other error
// from update is returned as is. A rule violation returns NodeExists with
// a *CellsAliasConflictError, a malformed name or cell InvalidArgument, and
// every other store error, PermissionDenied included, is returned at once
// (as IsPermanent or not, without a retry). A conflicting concurrent write
// is undone as in CreateCellsAlias.
func (s *Server) UpdateCellsAlias(ctx context.Context, alias string, update func(*topodatapb.CellsAlias) error) error {
	if err := checkAliasName(alias); err != nil {
		return err
	}
	p := CellsAliasPath(alias)
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
		data, v, err := s.global.Get(ctx, p)
		ca := &topodatapb.CellsAlias{}
		switch {
		case IsErrType(err, NoNode):
			data, v = nil, nil
		case err != nil:
			return err
		default:
			if uerr := proto.Unmarshal(data, ca); uerr != nil {
				return &Error{Code: InvalidArgument, Path: p, Err: uerr}
			}
		}
		if err := update(ca); err != nil {
			if IsErrType(err, NoUpdateNeeded) {
				return nil
			}
			return err
		}
		if err := checkCellsAlias(alias, ca); err != nil {
			return err
		}
		if err := s.aliasConflict(ctx, alias, ca); err != nil {
			return err
		}
		storeErr, ruleErr := s.writeAlias(ctx, alias, ca, data, v)
		if IsErrType(storeErr, NodeExists) || IsErrType(storeErr, BadVersion) {
			continue
		}
		if storeErr != nil {
			return storeErr
		}
		return ruleErr
	}
}

// DeleteCellsAlias deletes alias's record. It returns NoNode when there is
// no such alias, InvalidArgument for a malformed name, and the store's
// error (for example PermissionDenied) otherwise.
func (s *Server) DeleteCellsAlias(ctx context.Context, alias string) error {
	if err := checkAliasName(alias); err != nil {
		return err
	}
	return s.global.Delete(ctx, CellsAliasPath(alias), nil)
}

// GetAliasForCell returns the name of the cells alias cell belongs to. It
// returns NoNode when cell belongs to none (whether or not the cell has a
// CellInfo), NodeExists with a *CellsAliasConflictError listing them when
// it belongs to more than one (a store another tool wrote, or two writers
// caught mid-race; it never picks one), InvalidArgument for a malformed
// cell name, and the errors of GetCellsAliases otherwise. It reads every
// alias (one List); cache the result if you call it on a hot path.
func (s *Server) GetAliasForCell(ctx context.Context, cell string) (string, error) {
	if err := checkCellName(cell); err != nil {
		return "", err
	}
	all, err := s.GetCellsAliases(ctx)
	if err != nil {
		return "", err
	}
	var found []string
	for name, ca := range all {
		if slices.Contains(ca.GetCells(), cell) {
			found = append(found, name)
		}
	}
	switch len(found) {
	case 0:
		return "", &Error{Code: NoNode, Path: cell, Err: errors.New("the cell belongs to no cells alias")}
	case 1:
		return found[0], nil
	}
	sort.Strings(found)
	return "", conflict(CellsAliasesPath, &CellsAliasConflictError{Cell: cell, Aliases: found})
}
