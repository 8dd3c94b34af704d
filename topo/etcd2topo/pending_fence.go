package etcd2topo

// Placeholders for issue 11 (fencing tokens, Done, terms, transactions),
// to be replaced by the backend's real implementation and this file
// deleted. Nothing may ship with this file present.

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// Txn is not implemented yet.
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	return nil, topo.NewError(topo.NoImplementation, "txn")
}

// Token is not implemented yet.
func (l *lockDescriptor) Token() int64 { return 0 }

// Done is not implemented yet.
func (l *lockDescriptor) Done() <-chan struct{} { return nil }

// Term is not implemented yet.
func (p *participation) Term() (topo.Fence, error) {
	return nil, topo.NewError(topo.NotLeader, "")
}
