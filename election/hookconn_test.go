package election_test

import (
	"context"

	"github.com/topokit/topokit/topo"
)

// hookConn is a Conn whose participations call onWait when
// WaitForLeadership is called and onStop when Stop begins, each before the
// participation's own method runs (a nil hook is skipped). A test picks
// what a hook does: signal, block until released, or both.
type hookConn struct {
	topo.Conn
	onWait, onStop func()
}

func (c *hookConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	lp, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return nil, err
	}
	return &hookLP{LeaderParticipation: lp, c: c}, nil
}

type hookLP struct {
	topo.LeaderParticipation
	c *hookConn
}

func (p *hookLP) WaitForLeadership() (context.Context, error) {
	if p.c.onWait != nil {
		p.c.onWait()
	}
	return p.LeaderParticipation.WaitForLeadership()
}

func (p *hookLP) Stop() {
	if p.c.onStop != nil {
		p.c.onStop()
	}
	p.LeaderParticipation.Stop()
}
