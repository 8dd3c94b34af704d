package inspect

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// queryID is the participant id of the participation Leader reads
// through; it never campaigns.
const queryID = "topokit-inspect"

// Leader returns the current leader of the election name: its id, its
// published value and the fencing token of its term. It joins no
// election: it reads through a participation that never campaigns. A
// zero Leader (empty ID) and a nil error mean that nobody leads. Other
// errors are the store's (InvalidPath for a bad name, Timeout,
// Interrupted, Unavailable, ...).
func Leader(ctx context.Context, conn topo.Conn, name string) (topo.Leader, error) {
	lp, err := conn.NewLeaderParticipation(name, queryID)
	if err != nil {
		return topo.Leader{}, err
	}
	defer lp.Stop()
	l, err := lp.Leader(ctx)
	if topo.IsErrType(err, topo.NoLeader) {
		return topo.Leader{}, nil
	}
	return l, err
}
