package memorytopo

// Placeholders for issue 12 (leader values, Campaign/Proclaim/Resign/
// Leader/Observe, Resume), to be replaced by the backend's real
// implementation and this file deleted. Nothing may ship with this file
// present.

import (
	"context"

	"github.com/topokit/topokit/topo"
)

func pendingValues() error { return topo.NewError(topo.NoImplementation, "leader values") }

// ResumeLeaderParticipation is not implemented yet.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	return nil, pendingValues()
}

// Campaign is not implemented yet.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	return nil, pendingValues()
}

// Proclaim is not implemented yet.
func (p *participation) Proclaim(ctx context.Context, value []byte) error { return pendingValues() }

// Resign is not implemented yet.
func (p *participation) Resign(ctx context.Context) error { return pendingValues() }

// Leader is not implemented yet.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	return topo.Leader{}, pendingValues()
}

// Observe is not implemented yet.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	return nil, pendingValues()
}

// ResumeInfo is not implemented yet.
func (p *participation) ResumeInfo() ([]byte, error) { return nil, pendingValues() }
