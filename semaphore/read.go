package semaphore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/topokit/topokit/topo"
)

// Read returns the admitted holders of the semaphore in dir, in admission
// order, and the limit its contenders use, without a handle and whatever
// the limit (for inspection: topo/inspect, topoctl). A semaphore nobody
// acquired yet has no holders and limit 0. Holders whose session ended
// may be listed until a contender reclaims their slot. It returns
// InvalidPath for a bad or reserved dir (or the root), InvalidArgument
// when the record is not a semaphore's, and the store's errors. Safe for
// concurrent use.
func Read(ctx context.Context, conn topo.Conn, dir string) ([]Holder, int, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return nil, 0, err
	}
	if d == "" || topo.IsReserved(d) {
		return nil, 0, &topo.Error{Code: topo.InvalidPath, Path: dir, Err: errors.New("a semaphore needs a directory that is neither the root nor reserved")}
	}
	s := &Semaphore{conn: conn, dir: d}
	data, _, err := conn.Get(ctx, s.recordPath())
	if topo.IsErrType(err, topo.NoNode) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, 0, &topo.Error{Code: topo.InvalidArgument, Path: s.recordPath(), Err: fmt.Errorf("not a semaphore record: %w", err)}
	}
	return r.Holders, r.Limit, nil
}
