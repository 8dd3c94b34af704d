package topo

// Leader is an election's current leader, as LeaderParticipation.Leader
// and Observe report it.
type Leader struct {
	// ID is the participant id the leader joined with (the id
	// GetCurrentLeaderID returns, and the one Vitess processes read). ""
	// in an Observe event means that nobody leads.
	ID string
	// Value is the leader's published value: the one it gave Campaign, or
	// its last Proclaim. It is nil when the leader published none (it
	// joined with WaitForLeadership, or it is a Vitess process).
	Value []byte
	// Token is the fencing token of the leader's term (see
	// LeaderParticipation.Term): strictly greater for every later term.
	Token int64
}
