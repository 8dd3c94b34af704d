package decode

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/proto/vschemapb"
)

// Content says what kind of value a path of the layout holds.
type Content int

const (
	// UnknownContent: the path is not one of the layout's records.
	UnknownContent Content = iota
	// MessageContent: a protobuf message (Layout's Type names it).
	MessageContent
	// LockContent: a lock entry (<dir>/locks/<entry> on etcd and
	// ZooKeeper, <dir>/Lock on Consul, and the entries of a lock's queue
	// below it), holding the holder's description: Vitess writes JSON
	// (action, host, user, time, status), other tools any text.
	LockContent
	// ElectionContent: a file under elections/ (a candidate, a leader key,
	// a published value), holding a participant id or a value, as text.
	ElectionContent
	// TextContent: a text value of the layout (metadata/<key>).
	TextContent
)

// String names the content kind.
func (c Content) String() string {
	switch c {
	case MessageContent:
		return "message"
	case LockContent:
		return "lock holder"
	case ElectionContent:
		return "election entry"
	case TextContent:
		return "text"
	}
	return "unknown"
}

// PathRule is one rule of the layout: the files whose path ends in Pattern
// hold a record Name, of Content (a message of Type, or text).
type PathRule struct {
	// Pattern is slash-separated segments, each a name or "*" (any one
	// segment), matched against the last segments of a path, e.g.
	// "keyspaces/*/shards/*/Shard".
	Pattern string
	// Name is what Vitess calls the record: the last segment of Pattern
	// ("Shard"), except "KeyspaceRoutingRules" (at
	// routing_rules/keyspace/Rules), "ExternalVitessCluster" and
	// "Metadata".
	Name string
	// Content is MessageContent or TextContent.
	Content Content
	// Type is the full name of the message the files hold (Vitess's,
	// e.g. "topodata.Shard"; the registry uses topokit's compiled-in
	// type of the same wire format when it does not have Vitess's); ""
	// for text.
	Type string
	// Cell says where Vitess keeps the record: "global" (the global
	// cell) or "cell" (each cell).
	Cell string
}

// layoutRule is a PathRule with its compiled pattern and the compiled-in
// message of the same wire format.
type layoutRule struct {
	PathRule
	segs    []string
	builtin protoreflect.MessageDescriptor
}

// vitessLayout returns the records of Vitess's topology layout (v0.24),
// by path, with their message types: Vitess's full names, and topokit's
// types of the same wire format (proto/topodatapb, proto/vschemapb).
func vitessLayout() []layoutRule {
	rule := func(cell, pattern, name, vitess string, m interface {
		ProtoReflect() protoreflect.Message
	}) layoutRule {
		l := layoutRule{
			PathRule: PathRule{Pattern: pattern, Name: name, Content: TextContent, Type: vitess, Cell: cell},
			segs:     strings.Split(pattern, "/"),
		}
		if name == "" {
			l.Name = l.segs[len(l.segs)-1]
		}
		if m != nil {
			l.Content, l.builtin = MessageContent, m.ProtoReflect().Descriptor()
		}
		return l
	}
	return []layoutRule{
		rule("global", "keyspaces/*/Keyspace", "", "topodata.Keyspace", &topodatapb.Keyspace{}),
		rule("global", "keyspaces/*/VSchema", "", "vschema.Keyspace", &vschemapb.Keyspace{}),
		rule("global", "keyspaces/*/shards/*/Shard", "", "topodata.Shard", &topodatapb.Shard{}),
		rule("global", "RoutingRules", "", "vschema.RoutingRules", &vschemapb.RoutingRules{}),
		rule("global", "ShardRoutingRules", "", "vschema.ShardRoutingRules", &vschemapb.ShardRoutingRules{}),
		rule("global", "routing_rules/keyspace/Rules", "KeyspaceRoutingRules", "vschema.KeyspaceRoutingRules", &vschemapb.KeyspaceRoutingRules{}),
		rule("global", "MirrorRules", "", "vschema.MirrorRules", &vschemapb.MirrorRules{}),
		rule("global", "cells/*/CellInfo", "", "topodata.CellInfo", &topodatapb.CellInfo{}),
		rule("global", "cells_aliases/*/CellsAlias", "", "topodata.CellsAlias", &topodatapb.CellsAlias{}),
		rule("global", "ExternalClusters/vitess/*", "ExternalVitessCluster", "topodata.ExternalVitessCluster", &topodatapb.ExternalVitessCluster{}),
		rule("global", "metadata/*", "Metadata", "", nil),
		rule("cell", "tablets/*/Tablet", "", "topodata.Tablet", &topodatapb.Tablet{}),
		rule("cell", "SrvVSchema", "", "vschema.SrvVSchema", &vschemapb.SrvVSchema{}),
		rule("cell", "keyspaces/*/SrvKeyspace", "", "topodata.SrvKeyspace", &topodatapb.SrvKeyspace{}),
		rule("cell", "keyspaces/*/shards/*/ShardReplication", "", "topodata.ShardReplication", &topodatapb.ShardReplication{}),
	}
}

// segments splits a path into its non-empty segments.
func segments(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
}

// matches reports whether the last segments of path are pattern's (an
// empty pattern matches nothing).
func matches(pattern, path []string) bool {
	if len(pattern) == 0 || len(path) < len(pattern) {
		return false
	}
	tail := path[len(path)-len(pattern):]
	for i, s := range pattern {
		if s != "*" && s != tail[i] {
			return false
		}
	}
	return true
}

// lockOrElection says whether the path (relative to a cell's root) is a
// lock's or an election's file in the layout every backend shares: a
// first segment "elections", or a segment "locks" or "Lock" anywhere.
func lockOrElection(segs []string) Content {
	if len(segs) > 0 && segs[0] == "elections" {
		return ElectionContent
	}
	for _, s := range segs[:max(len(segs)-1, 0)] {
		if s == "locks" {
			return LockContent
		}
	}
	if len(segs) > 0 && segs[len(segs)-1] == "Lock" {
		return LockContent
	}
	return UnknownContent
}

// Layout returns the rules of Vitess's topology layout the registry knows
// records by (the same for every registry), in the order they are tried.
// Locks and elections are not in it: see Identify. The slice is the
// caller's.
func Layout() []PathRule {
	ls := vitessLayout()
	out := make([]PathRule, len(ls))
	for i, l := range ls {
		out[i] = l.PathRule
	}
	return out
}
