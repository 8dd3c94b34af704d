package topo

import "context"

type linearizableReadKey struct{}

// WithLinearizableRead returns a context under which the reads of a Conn
// (Get, List, ListDir, and the initial reads of Watch and WatchRecursive)
// are linearizable whatever options the Conn was opened with: each
// returns a state that includes every write acknowledged, to any client,
// before the call started. It is a per-call request and changes nothing
// for calls made under other contexts; it adds no error of its own.
//
// Per backend: zk2topo sends its read barrier (the check-only multi on "/"
// of zk2topo.Options.LinearizableReads) pipelined before each such read,
// which costs a quorum write; consultopo sends such reads in Consul's
// consistent mode (?consistent) even when the Conn's Options.Reads is
// ReadDefault; etcd2topo and memorytopo reads are linearizable already and
// ignore it. Other Conns may ignore it only if their reads are always
// linearizable. Safe for concurrent use; the marker is carried by ctx and
// by every context derived from it.
func WithLinearizableRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, linearizableReadKey{}, true)
}

// LinearizableRead reports whether ctx was derived from a context of
// WithLinearizableRead: a backend whose reads are not always linearizable
// must then make them so (see WithLinearizableRead). Safe for concurrent
// use.
func LinearizableRead(ctx context.Context) bool {
	v, _ := ctx.Value(linearizableReadKey{}).(bool)
	return v
}
