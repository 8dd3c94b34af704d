package topoctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
)

// store is one open topology: the Server and the Conn of the selected cell.
type store struct {
	srv  *topo.Server
	conn topo.Conn
	// name describes the store in messages, e.g. "etcd2:127.0.0.1:2379:/vitess".
	name string
	// addr is the server address of the selected cell ("" for memory), and
	// spec the store it is in, for connectivity checks.
	addr string
	spec spec
	// tree is the store and root conn reads: spec, or the selected cell's
	// (impl "" when unknown), for copy's overlap check.
	tree spec
}

func (s *store) Close() { s.srv.Close() }

// connector opens the stores of a command tree: the one its connection
// settings name (open), or one named IMPL:ADDR:ROOT (--from, --to). It
// names each store it opens to the printer, for the error lines, and
// decorates every connection with the command tree's middlewares. A
// command gets its store from one call and uses nothing else of it.
type connector struct {
	// settings are the resolved connection settings (set before any
	// command runs).
	settings
	out *printer
	// metrics are the topo metrics of --metrics-address, nil without it.
	metrics *middleware.Metrics
}

// callCtx bounds one store call by --timeout (no bound when it is 0).
func (o *connector) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return callCtx(ctx, o.timeout)
}

// callCtx bounds ctx by timeout (no bound when it is 0).
func callCtx(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// openCall opens the store as open does, for a command that makes one call:
// it also returns a context bounded by --timeout (see callCtx), started once
// the store is open. done cancels that context and then closes the store.
func (o *connector) openCall(ctx context.Context) (st *store, cctx context.Context, done func(), err error) {
	st, err = o.open(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	cctx, cancel := o.callCtx(ctx)
	return st, cctx, func() { cancel(); st.Close() }, nil
}

// open connects to the store named by the shared flags, and to --cell
// through its CellInfo when set.
func (o *connector) open(ctx context.Context) (*store, error) {
	return o.openSpec(ctx, spec{impl: o.impl, addr: o.addr, root: o.root, defaulted: o.addrDefaulted}, o.cell)
}

// openSpec connects to the store sp and selects cell ("" or "global" for
// the global cell).
func (o *connector) openSpec(ctx context.Context, sp spec, cell string) (*store, error) {
	o.out.log.Debug("opening topology", "implementation", sp.impl, "address", sp.addr, "root", sp.root, "cell", cell)
	warnConsulRoot(o.out, sp.impl, sp.root)
	warnEtcdRoot(o.out, sp.impl, sp.root)
	if err := o.checkListening(ctx, sp); err != nil {
		return nil, err
	}
	srv, err := o.openServer(ctx, sp)
	if err != nil {
		return nil, namedStore(err, sp)
	}
	st := &store{srv: srv, conn: srv.GlobalCell(), name: sp.String(), spec: sp, tree: sp}
	if sp.impl != "memory" {
		st.addr = sp.addr
	}
	o.out.named(st.name)
	if cell != "" && cell != topo.GlobalCell {
		cctx, cancel := o.callCtx(ctx)
		defer cancel()
		// The cell's address gets the dial guard the global one got: a
		// dead one fails at once, naming the cell's store, rather than
		// after --timeout. A missing CellInfo is left to ConnForCell.
		st.tree = spec{}
		noAddress := false
		if ci, err := srv.GetCellInfo(cctx, cell); err == nil {
			noAddress = ci.GetServerAddress() == ""
			csp := spec{impl: sp.impl, addr: ci.GetServerAddress(), root: ci.GetRoot()}
			st.tree = csp
			if err := o.checkListening(ctx, csp); err != nil {
				srv.Close()
				return nil, fmt.Errorf("cell %s: %w", cell, err)
			}
		}
		conn, err := srv.ConnForCell(cctx, cell)
		if err != nil {
			srv.Close()
			if noAddress {
				// (a CellInfo of Vitess's in-memory test cells names none)
				return nil, fmt.Errorf("cell %s: %w (its CellInfo names no server address: set one with \"topoctl cell set %s --server-address ADDR\")", cell, err, cell)
			}
			return nil, fmt.Errorf("cell %s: %w", cell, err)
		}
		st.conn = conn
		if ci, err := srv.GetCellInfo(cctx, cell); err == nil {
			st.name = sp.impl + ":" + ci.GetServerAddress() + ":" + ci.GetRoot() + " (cell " + cell + ")"
			// Errors name the store as summaries do: the cell's.
			o.out.rename(st.name)
			st.spec = spec{impl: sp.impl, addr: ci.GetServerAddress(), root: ci.GetRoot()}
			if sp.impl != "memory" {
				st.addr = ci.GetServerAddress()
			}
		}
	}
	return st, nil
}

// namedStore returns err, an error of opening sp, with sp named as
// IMPL:ADDR:ROOT where the backend put sp's address in the place of a
// path (errorLine would show it as the path "/ADDR").
func namedStore(err error, sp spec) error {
	var te *topo.Error
	if sp.addr != "" && errors.As(err, &te) && te.Path == sp.addr {
		te.Path = ""
		if te.Err == nil {
			te.Err = errors.New(sp.String())
		} else {
			te.Err = fmt.Errorf("%s: %w", sp, te.Err)
		}
	}
	return err
}

// storeDialBound is the bundled backends' own bound of a connection's
// dial (etcd2topo, zk2topo and consultopo's DefaultDialTimeout), and
// tlsProbeBound the TLS diagnosis's (see tlsDiagnosis): those a long or
// no --timeout leaves.
// minDialBound and minProbeBound are the least they get from a short
// --timeout: a --timeout meant for a lock's wait (200ms) must not leave a
// loaded or distant store too little time to be connected to at all.
const (
	storeDialBound = 5 * time.Second
	tlsProbeBound  = 5 * time.Second
	minDialBound   = 2 * time.Second
	minProbeBound  = time.Second
)

// dialBounds splits --timeout (timeout) between a store connection's dial (the
// backend's DialTimeout, see connect.Settings) and the TLS diagnosis of
// its failure (see explainDial), so that from a --timeout of 4s the two
// together end within it: the dial gets half of it, at least minDialBound
// and at most storeDialBound, and the diagnosis three eighths, at least
// minProbeBound and at most tlsProbeBound (a shorter --timeout bounds the
// calls more than the connection: a lock's 200ms wait cut the dial to
// 100ms). A refused TLS handshake fails the etcd2 and zk2 dials only at
// their bound, so the diagnosis needs its own share, and one large enough
// for a loaded server's handshake. The last eighth is the margin of what
// precedes the dial: the TCP probe, a cell's lookup, whose --timeout
// started first. With no --timeout (0) the dial keeps the backend's
// default (dial 0) and the diagnosis tlsProbeBound.
func dialBounds(timeout time.Duration) (dial, diagnosis time.Duration) {
	if timeout <= 0 {
		return 0, tlsProbeBound
	}
	return min(max(timeout/2, minDialBound), storeDialBound), min(max(timeout*3/8, minProbeBound), tlsProbeBound)
}

// dialTimeout bounds the TCP probe of a store's addresses (see
// checkListening).
const dialTimeout = time.Second

// serveHint ends the error of a store whose address was defaulted and
// where nothing listens.
const serveHint = `no server address was given: is "topoctl serve" running?`

// checkListening dials sp's addresses (etcd2, zk2 and consul) with a
// short bound (dialTimeout, or --timeout if shorter) and fails at once
// with Unavailable (its cause a *topo.UnreachableError) when none
// accepts a TCP connection, naming the cause of
// each failure: "cannot resolve the host name" (DNS), "no answer within"
// (the dial timed out) or "nothing accepts connections at" (refused), with
// the dial errors: the backends' clients
// would otherwise retry until --timeout. When the address was defaulted
// (the embedded etcd's), the error asks whether "topoctl serve" runs. A
// store that accepts connections and then fails gets no such check.
func (o *connector) checkListening(ctx context.Context, sp spec) error {
	switch sp.impl {
	case "etcd2", "zk2", "consul":
	default:
		return nil
	}
	timeout := dialTimeout
	if o.timeout > 0 && o.timeout < timeout {
		timeout = o.timeout
	}
	d := net.Dialer{Timeout: timeout}
	var refused, unresolved, silent, tried []string
	for _, a := range strings.Split(sp.addr, ",") {
		a = strings.TrimSpace(a)
		tried = append(tried, a)
		for _, p := range []string{"http://", "https://"} {
			a = strings.TrimPrefix(a, p)
		}
		a, _, _ = strings.Cut(a, "/") // a ZooKeeper chroot, a URL path
		if _, _, err := net.SplitHostPort(a); err != nil {
			return nil // not host:port: leave it to the backend
		}
		c, err := d.DialContext(ctx, "tcp", a)
		if err == nil {
			_ = c.Close()
			return nil
		}
		if ctx.Err() != nil {
			// Ctrl-C (or the caller's end) during the dial: not the
			// store's fault.
			return &topo.Error{Code: topo.Interrupted, Err: fmt.Errorf("%s: interrupted while connecting to %s: %w", sp, sp.addr, ctx.Err())}
		}
		var dnsErr *net.DNSError
		var netErr net.Error
		switch {
		case errors.As(err, &dnsErr):
			unresolved = append(unresolved, err.Error())
		case errors.As(err, &netErr) && netErr.Timeout():
			silent = append(silent, err.Error())
		default:
			refused = append(refused, err.Error())
		}
	}
	o.out.log.Debug("nothing listens at the store's address", "address", sp.addr, "refused", refused, "unresolved", unresolved, "silent", silent)
	// One cause per message: a name that does not resolve is no server
	// refusing connections, nor one that does not answer.
	var causes []string
	if len(unresolved) > 0 {
		causes = append(causes, "cannot resolve the host name: "+strings.Join(unresolved, "; "))
	}
	if len(silent) > 0 {
		causes = append(causes, fmt.Sprintf("no answer within %s: %s", timeout, strings.Join(silent, "; ")))
	}
	if len(refused) > 0 {
		causes = append(causes, "nothing accepts connections at "+sp.addr+": "+strings.Join(refused, "; "))
	}
	msg := fmt.Sprintf("%s: %s", sp, strings.Join(causes, "; "))
	if sp.defaulted {
		msg += " (" + serveHint + ")"
	}
	return &topo.Error{Code: topo.Unavailable, Err: &topo.UnreachableError{Addrs: tried, Err: errors.New(msg)}}
}

// spec names a store: implementation, server address and root.
type spec struct {
	impl, addr, root string
	// defaulted: no address was given and addr is the embedded etcd's.
	defaulted bool
}

// String returns the IMPL:ADDR:ROOT form.
func (s spec) String() string { return s.impl + ":" + s.addr + ":" + s.root }

// parseSpec parses IMPL:ADDR:ROOT. The implementation ends at the first
// ':' and the root starts after the last ':', so the address may hold
// host:port pairs ("etcd2:127.0.0.1:2379,127.0.0.1:22379:/vitess"). An empty
// address means the default one (the embedded etcd's for etcd2).
func (o *connector) parseSpec(flag, s string) (spec, error) {
	first := strings.IndexByte(s, ':')
	last := strings.LastIndexByte(s, ':')
	if first < 0 || first == last {
		return spec{}, usagef("--%s %q: want IMPL:ADDR:ROOT, e.g. etcd2:127.0.0.1:2379:/vitess", flag, s)
	}
	sp := spec{impl: s[:first], addr: s[first+1 : last], root: s[last+1:]}
	if sp.impl == "" {
		return spec{}, usagef("--%s %q: empty implementation", flag, s)
	}
	if _, err := topo.GetFactory(sp.impl); err != nil {
		return spec{}, exitError{code: ExitFailure, err: err}
	}
	if sp.addr == "" {
		sp.addr = o.conventionalAddress(sp.impl)
	}
	switch {
	case sp.addr != "":
	case sp.impl == "etcd2":
		sp.addr = o.defaultAddress()
		sp.defaulted = true
	case sp.impl == "zk2" || sp.impl == "consul":
		return spec{}, usagef("--%s %q: empty server address", flag, s)
	default:
		// memory, and backends registered by the embedding program,
		// take "" as given (see resolve).
	}
	return sp, nil
}

// openServer opens the global cell of sp's store with the security
// settings, every connection of the Server decorated with the command
// tree's middlewares (--metrics-address, --log-level debug). Each
// connection's dial, and the TLS diagnosis of its failure, are bounded by
// --timeout (see dialBounds): the backend itself fails the open, with its
// Unavailable error naming the address, which the diagnosis explains.
func (o *connector) openServer(ctx context.Context, sp spec) (*topo.Server, error) {
	cs := o.sec.settings(o.explainEtcdDial)
	cs.ClaimTTL = o.claimTTL
	cs.DialTimeout, _ = dialBounds(o.timeout)
	ts, err := cs.Open(ctx, sp.impl, sp.addr, sp.root, o.middlewares()...)
	if err != nil {
		return nil, o.explainOtherDial(sp.impl, sp.addr, err)
	}
	return ts, nil
}

// middlewares returns the decorators of every connection this command
// tree opens: the metrics of --metrics-address and, at --log-level debug,
// one log record per call.
func (o *connector) middlewares() []topo.Middleware {
	var mws []topo.Middleware
	if o.metrics != nil {
		mws = append(mws, o.metrics.Middleware())
	}
	if o.out.log.Enabled(context.Background(), slog.LevelDebug) {
		mws = append(mws, middleware.Logging(o.out.log))
	}
	return mws
}

// globalOnly opens the store for a command that works on the global cell's
// records only: --cell does not apply to it.
func (o *connector) globalOnly(ctx context.Context, cmd *cobra.Command) (*store, error) {
	if o.cell != "" && o.cell != topo.GlobalCell && cmd.Flags().Changed("cell") {
		return nil, usagef("%s works on the global cell: --cell does not apply", cmd.CommandPath())
	}
	return o.openSpec(ctx, spec{impl: o.impl, addr: o.addr, root: o.root, defaulted: o.addrDefaulted}, "")
}

// openFrom opens the store named by a --from/--to flag, or the one named
// by the shared flags (and --cell) when the flag is empty.
func (o *connector) openFrom(ctx context.Context, flag, value string) (*store, error) {
	if value == "" {
		return o.open(ctx)
	}
	sp, err := o.parseSpec(flag, value)
	if err != nil {
		return nil, err
	}
	return o.openSpec(ctx, sp, "")
}

// openPair does what copy and diff (named by verb) share before they read:
// it checks --to and the --from/--to specs, cleans the optional PATH
// argument (default: the root) into under, and opens the two stores. On
// error no store is left open.
func (o *connector) openPair(ctx context.Context, verb, from, to string, args []string) (src, dst *store, under string, err error) {
	if to == "" {
		return nil, nil, "", usagef("%s needs --to IMPL:ADDR:ROOT", verb)
	}
	if err := o.checkSpecs(from, to); err != nil {
		return nil, nil, "", err
	}
	under, err = topo.CleanDirPath(argOr(args, 0, "/"))
	if err != nil {
		return nil, nil, "", err
	}
	src, err = o.openFrom(ctx, "from", from)
	if err != nil {
		return nil, nil, "", err
	}
	dst, err = o.openFrom(ctx, "to", to)
	if err != nil {
		src.Close()
		return nil, nil, "", err
	}
	return src, dst, under, nil
}

// checkSpecs parses the --from and --to values before anything is opened,
// so that a malformed one is reported as a usage error first.
func (o *connector) checkSpecs(from, to string) error {
	if from != "" {
		if _, err := o.parseSpec("from", from); err != nil {
			return err
		}
	}
	_, err := o.parseSpec("to", to)
	return err
}

// at fills in the path of a topo error that names none (backends leave it
// empty for the root), so that every error line names a path.
func at(err error, canonical string) error {
	var te *topo.Error
	if errors.As(err, &te) && te.Path == "" {
		return &topo.Error{Code: te.Code, Path: displayPath(canonical), Err: te.Err}
	}
	return err
}

// nested reports whether the tree under PATH (under) in dst lies inside
// the one in src (dstInside) or the other way round (srcInside): both
// stores named by the same implementation and address, one's root plus
// under strictly below the other's. Addresses are compared as written
// (two spellings of one server are not caught).
func nested(src, dst *store, under string) (dstInside, srcInside bool) {
	a, b := src.tree, dst.tree
	if a.impl == "" || a.impl != b.impl || a.addr != b.addr {
		return false, false
	}
	from, to := path.Join("/", a.root, under), path.Join("/", b.root, under)
	return strings.HasPrefix(to, strings.TrimSuffix(from, "/")+"/"), strings.HasPrefix(from, strings.TrimSuffix(to, "/")+"/")
}
