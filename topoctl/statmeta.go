package topoctl

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/zk2topo"
)

// metaField is one item of a store's own metadata about a path, in the
// store's terms: its JSON name (snake_case) and its value (an int64, a
// string or a []string).
type metaField struct {
	name  string
	value any
}

// label is the field's name as stat's text output shows it.
func (f metaField) label() string { return strings.ReplaceAll(f.name, "_", " ") }

// storeMeta reads what the store itself keeps about the path p (canonical,
// "" for the root) of the store sp, beyond the topology interface's version:
// etcd's create and mod revisions, key version and lease; ZooKeeper's
// zxids, times, data and child versions, ephemeral owner (session) and ACL;
// Consul's create, modify and lock indexes, flags and session. It reads
// through a client of its own with the --etcd-*, --zk-* and --consul-* TLS
// and authentication settings, in the layout docs/layout-*.md describe. It
// returns nil for other backends, for a path the store holds no key or
// znode for (an implicit directory), and when the read fails (logged at
// debug level): this metadata is a complement, never the answer.
func (o *options) storeMeta(ctx context.Context, sp spec, p string) []metaField {
	var (
		fields []metaField
		err    error
	)
	switch sp.impl {
	case etcd2topo.FactoryName:
		fields, err = o.etcdMeta(ctx, sp, p)
	case zk2topo.FactoryName:
		fields, err = o.zkMeta(ctx, sp, p)
	case consultopo.FactoryName:
		fields, err = o.consulMeta(ctx, sp, p)
	default:
		return nil
	}
	if err != nil {
		o.log.Debug("cannot read the store's metadata", "path", displayPath(p), "err", err)
		return nil
	}
	return fields
}

// etcdMeta reads the key of file p (<root>/p) with a client of its own.
func (o *options) etcdMeta(ctx context.Context, sp spec, p string) ([]metaField, error) {
	if p == "" {
		return nil, nil
	}
	opts := o.etcdOptions(sp.addr)
	opts.AutoSyncInterval = 0
	c, err := etcd2topo.NewConnContext(ctx, opts, sp.root)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	key := p
	if sp.root != "" {
		key = strings.TrimRight(sp.root, "/") + "/" + p
	}
	resp, err := c.Client().Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	lease := ""
	if kv.Lease != 0 {
		lease = fmt.Sprintf("%x", kv.Lease)
	}
	return []metaField{
		{"key", key},
		{"create_revision", kv.CreateRevision},
		{"mod_revision", kv.ModRevision},
		{"key_version", kv.Version},
		{"lease", lease},
	}, nil
}

// consulMeta reads the key of file p (<root>/p) with a client of its own.
func (o *options) consulMeta(ctx context.Context, sp spec, p string) ([]metaField, error) {
	if p == "" {
		return nil, nil
	}
	s := o.sec
	c, err := consultopo.NewConn(consultopo.Options{Address: sp.addr, Token: s.consulToken, TokenFile: s.consulTokenFile,
		CAFile: s.consulCA, CertFile: s.consulCert, KeyFile: s.consulKey, TLSServerName: s.consulServerName}, sp.root)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	root, err := topo.CleanDirPath(sp.root)
	if err != nil {
		return nil, err
	}
	key := backendkit.JoinPath(root, p)
	pair, _, err := c.Client().KV().Get(key, (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
	if err != nil {
		return nil, err
	}
	if pair == nil {
		return nil, nil
	}
	return []metaField{
		{"key", key},
		{"create_index", int64(pair.CreateIndex)},
		{"modify_index", int64(pair.ModifyIndex)},
		{"lock_index", int64(pair.LockIndex)},
		{"flags", int64(pair.Flags)},
		{"session", pair.Session},
	}, nil
}

// zkMeta reads the znode of p (<root>/p; the root's own for "") and its
// ACL on a session of its own.
func (o *options) zkMeta(ctx context.Context, sp spec, p string) ([]metaField, error) {
	var servers []string
	for s := range strings.SplitSeq(sp.addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	root, err := topo.CleanDirPath(sp.root)
	if err != nil {
		return nil, err
	}
	dial := zk.Dialer(net.DialTimeout)
	if s := o.sec; s.zkCA != "" || s.zkCert != "" || s.zkKey != "" {
		cfg, err := zkTLSConfig(s)
		if err != nil {
			return nil, err
		}
		dial = func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
		}
	}
	z, _, err := zk.Connect(servers, zkHolderSessionTimeout, zk.WithLogger(zkLogger{o}), zk.WithDialer(dial))
	if err != nil {
		return nil, err
	}
	defer z.Close()
	znode := "/" + backendkit.JoinPath(root, p)
	if znode != "/" {
		znode = strings.TrimRight(znode, "/")
	}
	type answer struct {
		fields []metaField
		err    error
	}
	ch := make(chan answer, 1)
	go func() {
		if err := zkAddAuth(z, o.sec); err != nil {
			ch <- answer{nil, err}
			return
		}
		acl, st, err := z.GetACL(znode)
		if err == zk.ErrNoNode {
			ch <- answer{nil, nil}
			return
		}
		if err != nil {
			ch <- answer{nil, err}
			return
		}
		acls := []string{}
		for _, a := range acl {
			acls = append(acls, a.Scheme+":"+a.ID+":"+zkPerms(a.Perms))
		}
		owner := ""
		if st.EphemeralOwner != 0 {
			owner = fmt.Sprintf("%x", st.EphemeralOwner)
		}
		ch <- answer{[]metaField{
			{"znode", znode},
			// In hexadecimal, as ZooKeeper's own tools (zkCli's stat,
			// the server's logs) show zxids.
			{"czxid", fmt.Sprintf("0x%x", st.Czxid)},
			{"mzxid", fmt.Sprintf("0x%x", st.Mzxid)},
			{"ctime", time.UnixMilli(st.Ctime).UTC().Format(time.RFC3339Nano)},
			{"mtime", time.UnixMilli(st.Mtime).UTC().Format(time.RFC3339Nano)},
			{"data_version", int64(st.Version)},
			{"child_version", int64(st.Cversion)},
			{"children", int64(st.NumChildren)},
			{"ephemeral_owner", owner},
			{"acl", acls},
		}, nil}
	}()
	select {
	case a := <-ch:
		return a.fields, a.err
	case <-ctx.Done():
		z.Close() // ends the calls in flight
		<-ch
		return nil, ctx.Err()
	}
}

// zkAddAuth adds the --zk-auth (or --zk-auth-file) identity to z's
// session.
func zkAddAuth(z *zk.Conn, s security) error {
	auth := s.zkAuth
	if auth == "" && s.zkAuthFile != "" {
		b, err := os.ReadFile(s.zkAuthFile)
		if err != nil {
			return err
		}
		auth = strings.TrimSpace(string(b))
	}
	if auth == "" {
		return nil
	}
	scheme, a, ok := strings.Cut(auth, ":")
	if !ok {
		return fmt.Errorf(`--zk-auth: want "scheme:auth"`)
	}
	return z.AddAuth(scheme, []byte(a))
}

// zkPerms renders ZooKeeper permission bits as zkCli does: a subset of
// "cdrwa" (create, delete, read, write, admin).
func zkPerms(p int32) string {
	var b strings.Builder
	for _, x := range []struct {
		bit int32
		c   byte
	}{{zk.PermCreate, 'c'}, {zk.PermDelete, 'd'}, {zk.PermRead, 'r'}, {zk.PermWrite, 'w'}, {zk.PermAdmin, 'a'}} {
		if p&x.bit != 0 {
			b.WriteByte(x.c)
		}
	}
	return b.String()
}
