package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// LockHolder returns the contents of the lowest entry of the lock on
// directory dir, its holder (read as Describe reads the queue; empty when
// the holder locked with empty contents). It returns NoNode when the lock
// has no entry, InvalidPath for a bad dir, and the errors of a read. Safe
// for concurrent use; topo/inspect calls it on Conns without a queue
// reader.
func (c *Conn) LockHolder(ctx context.Context, dir string) (string, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return "", err
	}
	entries, err := driver{c}.Describe(ctx, claims.Queue{Path: d})
	if err != nil {
		return "", c.convert(err, d)
	}
	if len(entries) > 0 {
		return entries[0].Contents, nil
	}
	return "", topo.NewError(topo.NoNode, backendkit.JoinPath(d, backendkit.LocksDirName))
}

// StoreMeta returns what ZooKeeper keeps about p's znode ("" for the
// root): zxids and ephemeral owner in hexadecimal, times, versions,
// children and ACL, as zkCli shows them. It returns nil for no such znode,
// InvalidPath for a bad p, and the errors of a read. Safe for concurrent
// use; topo/inspect calls it.
func (c *Conn) StoreMeta(ctx context.Context, p string) ([]backendkit.MetaField, error) {
	d, err := topo.CleanDirPath(p)
	if err != nil {
		return nil, err
	}
	znode := c.zkPath(d)
	var fields []backendkit.MetaField
	err = c.read(ctx, d, func(z *zk.Conn) error {
		acl, st, err := z.GetACL(znode)
		if err == zk.ErrNoNode {
			return nil
		}
		if err != nil {
			return err
		}
		acls := []string{}
		for _, a := range acl {
			acls = append(acls, a.Scheme+":"+a.ID+":"+zkPerms(a.Perms))
		}
		owner := ""
		if st.EphemeralOwner != 0 {
			owner = fmt.Sprintf("%x", st.EphemeralOwner)
		}
		fields = []backendkit.MetaField{
			{Name: "znode", Value: znode},
			{Name: "czxid", Value: fmt.Sprintf("0x%x", st.Czxid)},
			{Name: "mzxid", Value: fmt.Sprintf("0x%x", st.Mzxid)},
			{Name: "ctime", Value: time.UnixMilli(st.Ctime).UTC().Format(time.RFC3339Nano)},
			{Name: "mtime", Value: time.UnixMilli(st.Mtime).UTC().Format(time.RFC3339Nano)},
			{Name: "data_version", Value: int64(st.Version)},
			{Name: "child_version", Value: int64(st.Cversion)},
			{Name: "children", Value: int64(st.NumChildren)},
			{Name: "ephemeral_owner", Value: owner},
			{Name: "acl", Value: acls},
		}
		return nil
	})
	if err != nil {
		return nil, c.convert(err, d)
	}
	return fields, nil
}

// zkPerms renders permission bits as zkCli does ("cdrwa").
func zkPerms(p int32) string {
	var b strings.Builder
	for i, bit := range []int32{zk.PermCreate, zk.PermDelete, zk.PermRead, zk.PermWrite, zk.PermAdmin} {
		if p&bit != 0 {
			b.WriteByte("cdrwa"[i])
		}
	}
	return b.String()
}

var _ claims.Describer = driver{}

// Describe implements claims.Describer: the queue's children in sequence
// order, then each entry's data and Stat (token: Czxid; session: owner;
// created: ctime, the server's clock), on the current session. An entry
// deleted meanwhile is left out; an absent parent is an empty queue.
func (d driver) Describe(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	parent := d.parent(q)
	var out []claims.Entry
	err := d.c.read(ctx, q.Path, func(z *zk.Conn) error {
		out = out[:0]
		children, _, err := z.Children(parent)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, n := range entryNames(children) {
			node := parent + "/" + n
			data, st, err := z.Get(node)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, claims.Entry{Token: st.Czxid, Key: node, Session: sessionName(st.EphemeralOwner), Contents: string(data),
				Created: time.UnixMilli(st.Ctime)})
		}
		return nil
	})
	return out, err
}
