package topoctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
)

// watching is what watch and leader --observe share: the store to watch,
// the printer of their events, and its --full.
type watching struct {
	stores *connector
	out    *printer
	// full is watch's --full.
	full bool
	// dec decodes each value (watch --decode); nil prints the bytes.
	dec *recordDecoder
	// mu serializes the lines of the files of a watch of several files.
	mu sync.Mutex
}

// watchEvent is one line of watch output.
type watchEvent struct {
	Path    string      `json:"path"`
	Version jsonVersion `json:"version,omitempty"`
	Value   []byte      `json:"value,omitempty"`
	Deleted bool        `json:"deleted"`
	// Revision is the etcd revision of the change, with watch --rev
	// only: resume with --rev Revision+1.
	Revision int64 `json:"revision,omitempty"`
}

func (o *watching) printEvent(ev watchEvent) error {
	var decoded any
	var text string
	var derr error
	if o.dec != nil && !ev.Deleted {
		decoded, text, derr = o.dec.decode(strings.TrimPrefix(ev.Path, "/"), ev.Value, !o.out.jsonOut())
	}
	if o.out.jsonOut() {
		if !ev.Deleted {
			// An empty value is "", not left out.
			return o.out.printJSON(struct {
				Path     string      `json:"path"`
				Version  jsonVersion `json:"version"`
				Value    []byte      `json:"value"`
				Deleted  bool        `json:"deleted"`
				Revision int64       `json:"revision,omitempty"`
				decodedJSON
			}{ev.Path, ev.Version, nonNil(ev.Value), false, ev.Revision, decodedMembers(decoded, derr)})
		}
		return o.out.printJSON(ev)
	}
	if ev.Deleted {
		if ev.Revision > 0 {
			o.out.printf("%s deleted at revision %d\n", ev.Path, ev.Revision)
			return nil
		}
		o.out.printf("%s deleted\n", ev.Path)
		return nil
	}
	if o.dec != nil && derr == nil {
		o.out.printf("%s %s\n%s", ev.Path, ev.Version, text)
		return nil
	}
	if derr != nil {
		o.out.eprintf("note: %s not decoded: %s\n", ev.Path, escapeControl(derr.Error()))
	}
	v := ev.Value
	more := ""
	if !o.full && len(v) > watchValueLimit {
		v, more = v[:watchValueLimit], fmt.Sprintf(" ... (%d bytes; --full prints all)", len(ev.Value))
	}
	o.out.printf("%s %s %s%s\n", ev.Path, ev.Version, strconv.Quote(string(v)), more)
	return nil
}

// watchValueLimit is how many bytes of a value a text watch line shows
// without --full.
const watchValueLimit = 200

// endOfWatch turns the error that ended a watch into the command's result:
// an interruption by the user (ctx cancelled) is a normal end.
func endOfWatch(ctx context.Context, err error) error {
	if ctx.Err() != nil && (topo.IsErrType(err, topo.Interrupted) || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

func newWatchCmd(stores *connector, out *printer) *cobra.Command {
	o := &watching{stores: stores, out: out}
	var (
		recursive, wait  bool
		rawPrefix        bool
		rev              int64
		decode, protoset string
	)
	cmd := &cobra.Command{
		Use:   "watch FILE [FILE...] | watch -R DIR | watch --prefix PREFIX",
		Short: "Print a file's changes (or every file's under a directory or prefix) until interrupted",
		Long: `Print the current value of FILE, then one line per change, until
interrupted (Ctrl-C, SIGTERM) or the file is deleted (a FILE that does not
exist is NoNode, unless --wait waits for it to be created). Each line is
"PATH VERSION VALUE" with the value quoted (its first 200 bytes, then
"... (N bytes; --full prints all)", unless --full), or "PATH deleted".

watch -R DIR prints every file under the directory DIR (its subtree:
DIR/..., as -R means in ls, rm and every other command), then one line
per change, creation or deletion of such a file, until interrupted.
watch --prefix PREFIX does the same for every file whose path starts with
PREFIX, a plain string prefix ("/keyspaces/c" matches
"/keyspaces/commerce/..."), like "etcdctl watch --prefix".
With --output json every line is a JSON object. The initial read is bounded
by --timeout; the watch itself is not.

When the store cannot be reached or the watch fails (the server died, a
partition), watch says so on stderr ("reconnecting"), retries every second,
says "reconnected" when the server answers again, prints what changed
meanwhile and goes on. To notice a partition, which leaves connections open
but silent, watch also reads FILE (-R: DIR; --prefix: the PREFIX as a path) once a second,
bounded by 5s (or a shorter --timeout): a read that gets no answer counts
as a lost connection. A permission refusal ends it.

--rev N (etcd only; like "etcdctl watch --rev") prints, from etcd's history,
every change from revision N on -- writes as "PATH VERSION VALUE" (on etcd
a file's version is the revision that wrote it) and deletions as "PATH
deleted at revision R" -- then the live changes, until interrupted; a
deletion does not end it. To resume a watch that stopped, give --rev the
last version or revision printed plus one: nothing is missed or printed
twice. A revision etcd compacted away fails with Compacted, naming the
oldest one it still has. Other backends keep no history to replay: --rev is
a usage error there (NoImplementation; docs/backends.md says why, store by
store). There is no --since TIME: no store maps a time to a revision.

watch FILE FILE... watches several files through ONE store watch: a read
cache (topo/cache) of their longest common directory (the whole store when
they share none; at most 256 MiB: beyond, watch fails with
ResourceExhausted), of which each FILE is a local watcher. Each FILE is
printed as watch FILE prints it: its value, then each change, in order;
the lines of different files interleave as they are printed, not
necessarily in the store's order. Its differences from one watch FILE per
file:
  - The first values come from the cache's first listing, after a
    bounded read of every FILE: a FILE that does not exist fails the whole
    command with NoNode before anything is printed, unless --wait, which
    waits for each missing FILE.
  - A deleted FILE prints "PATH deleted" and its watch ends; the others go
    on. The command ends (exit 0) when every FILE was deleted.
  - Outages: the cache probes the store once a second (bounded by 1s); when
    the store does not answer or the watch fails, watch says "lost the
    connection to ADDR (...): reconnecting" (or "the store watch ended
    (...): reconnecting") on stderr, and "reconnected to ADDR" once the
    cache is healthy again; every FILE that changed meanwhile is printed
    (a FILE deleted meanwhile prints "PATH deleted"), from the resumed
    store watch or, when it failed, the cache's new listing. A refusal
    (PermissionDenied) ends it, as it ends watch FILE.
  - A slow output (a terminal or pipe that stops reading) holds up to 1024
    changes per FILE; beyond, the cache drops that FILE's watcher: watch
    prints the changes it held, says on stderr "PATH: the output fell more
    than 1024 changes behind: the changes after those were skipped; the
    current value follows", watches it again and prints its current value:
    intermediate values may be missed then, the latest never.
  - -R, --prefix and --rev take one argument (--rev: run one watch --rev
    per file, or watch --rev -R their directory).

--decode (bare, or --decode json) prints each value decoded as readable
JSON, as get --decode does, each record's type chosen by its own path:
every record of Vitess's layout is built in, locks, elections and metadata
show the JSON or text they hold, and --protoset adds types (default
$` + envProtoset + `); --decode raw prints protobuf wire dumps. "PATH VERSION" is
on one line and the decoded value below it.
A value that does not decode is printed as without --decode, with a note
on stderr saying why. With --output json each change's object gets
"decoded" (or "decode_error" when it does not decode).`,
		Example: `  topoctl watch /keyspaces/commerce/Keyspace
  topoctl watch /keyspaces/commerce/Keyspace /keyspaces/customer/Keyspace   # one store watch
  topoctl watch -R /keyspaces/ -o json
  topoctl watch -R --decode /keyspaces/
  topoctl watch --rev 1042 -R /keyspaces/   # resume after revision 1041`,
		Args: watchArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var err error
			if recursive && rawPrefix {
				return usagef("-R watches a directory's subtree, --prefix a plain string prefix: give one")
			}
			if err := checkWatchFiles(len(args), recursive, rawPrefix, cmd.Flags().Changed("rev")); err != nil {
				return err
			}
			if o.dec, err = newRecordDecoder(decode, protoset, stores.getenv); err != nil {
				return err
			}
			if len(args) > 1 {
				paths, err := dedupPaths(args)
				if err != nil {
					return err
				}
				if len(paths) > 1 {
					return o.watchFiles(ctx, paths, wait)
				}
			}
			if cmd.Flags().Changed("rev") {
				if rev < 1 {
					return usagef("--rev must be a revision, at least 1")
				}
				if wait {
					return usagef("--rev replays history: it does not combine with --wait")
				}
				if err := o.checkWatchRev(); err != nil {
					return err
				}
				var p string
				var err error
				if recursive || rawPrefix {
					p, err = subtreePrefix(args[0], rawPrefix)
				} else {
					p, err = topo.CleanFilePath(args[0])
				}
				if err != nil {
					return err
				}
				st, err := stores.open(ctx)
				if err != nil {
					return err
				}
				defer st.Close()
				return o.watchFromRevision(ctx, st, p, recursive || rawPrefix, rev)
			}
			if recursive || rawPrefix {
				prefix, err := subtreePrefix(args[0], rawPrefix)
				if err != nil {
					return err
				}
				st, wctx, cancel, err := o.openWatch(ctx, func(c context.Context, conn topo.Conn) error {
					_, err := conn.List(c, prefix)
					if topo.IsErrType(err, topo.NoNode) || topo.IsErrType(err, topo.PartialResult) {
						return nil
					}
					return at(err, prefix)
				})
				if err != nil {
					return err
				}
				defer st.Close()
				defer cancel()
				rw := &rewatcher{}
				stopMonitor := o.monitor(wctx, st, strings.TrimSuffix(prefix, "/"), rw.restart)
				defer stopMonitor()
				seen := map[string]string{} // path -> version printed last
				for attempt := 0; ; attempt++ {
					actx := rw.attempt(wctx)
					initial, changes, err := st.conn.WatchRecursive(actx, prefix)
					if err != nil {
						if attempt == 0 {
							return at(err, prefix)
						}
						if err := o.rewatchWait(wctx, ctx, prefix, err); err != nil {
							return endOfWatch(ctx, err)
						}
						continue
					}
					// After a reconnection, print what changed meanwhile.
					now := map[string]bool{}
					for _, wd := range initial {
						now[wd.Path] = true
						if v := wd.Version.String(); seen[wd.Path] != v {
							seen[wd.Path] = v
							if err := o.printEvent(watchEvent{Path: displayPath(wd.Path), Version: jsonVersion(v), Value: wd.Contents}); err != nil {
								drainAfter(func() {}, changes)
								return err
							}
						}
					}
					for p := range seen {
						if !now[p] {
							delete(seen, p)
							_ = o.printEvent(watchEvent{Path: displayPath(p), Deleted: true})
						}
					}
					var werr error
					for wd := range changes {
						switch {
						case wd.Err == nil:
							seen[wd.Path] = wd.Version.String()
							werr = o.printEvent(watchEvent{Path: displayPath(wd.Path), Version: jsonVersion(wd.Version.String()), Value: wd.Contents})
						case topo.IsErrType(wd.Err, topo.NoNode) && wd.Path != "":
							delete(seen, wd.Path)
							werr = o.printEvent(watchEvent{Path: displayPath(wd.Path), Deleted: true})
						default:
							werr = wd.Err
						}
						if werr != nil {
							break
						}
					}
					drainAfter(rw.cancel, changes)
					if werr == nil {
						werr = topo.NewError(topo.Interrupted, prefix)
					}
					if ctx.Err() != nil {
						return endOfWatch(ctx, werr)
					}
					if rw.restarted() {
						continue // the store is back: watch again at once
					}
					if !isStoreErr(werr) {
						return werr
					}
					if err := o.rewatchWait(wctx, ctx, prefix, werr); err != nil {
						return endOfWatch(ctx, err)
					}
				}
			}

			p, err := topo.CleanFilePath(args[0])
			if err != nil {
				return err
			}
			st, wctx, cancel, err := o.openWatch(ctx, func(c context.Context, conn topo.Conn) error {
				_, _, err := conn.Get(c, p)
				if !topo.IsErrType(err, topo.NoNode) {
					return err
				}
				if wait {
					return nil
				}
				// Say what to run instead: -R for a directory,
				// --wait for a file not created yet.
				if derr := notADirectory(c, conn, p, err, "watch -R %s follows every file under it"); derr != err {
					return derr
				}
				return &kindError{msg: fmt.Sprintf("%s does not exist (watch --wait %s waits for it to be created)", displayPath(p), displayPath(p)), err: err}
			})
			if err != nil {
				return err
			}
			defer st.Close()
			defer cancel()
			rw := &rewatcher{}
			stopMonitor := o.monitor(wctx, st, p, rw.restart)
			defer stopMonitor()
			last := ""
			for attempt := 0; ; attempt++ {
				actx := rw.attempt(wctx)
				cur, changes, err := st.conn.Watch(actx, p)
				switch {
				case err == nil:
				case attempt == 0 && wait && topo.IsErrType(err, topo.NoNode):
					if err := o.waitCreated(wctx, st.conn, p); err != nil {
						return endOfWatch(ctx, err)
					}
					attempt = -1
					continue
				case attempt == 0:
					return err
				case topo.IsErrType(err, topo.NoNode):
					return o.printEvent(watchEvent{Path: displayPath(p), Deleted: true})
				default:
					if err := o.rewatchWait(wctx, ctx, p, err); err != nil {
						return endOfWatch(ctx, err)
					}
					continue
				}
				if v := cur.Version.String(); v != last {
					last = v
					if err := o.printEvent(watchEvent{Path: displayPath(p), Version: jsonVersion(v), Value: cur.Contents}); err != nil {
						drainAfter(func() {}, changes)
						return err
					}
				}
				var werr error
				deleted := false
				for wd := range changes {
					switch {
					case wd.Err == nil:
						last = wd.Version.String()
						werr = o.printEvent(watchEvent{Path: displayPath(p), Version: jsonVersion(last), Value: wd.Contents})
					case topo.IsErrType(wd.Err, topo.NoNode):
						deleted = true
						werr = o.printEvent(watchEvent{Path: displayPath(p), Deleted: true})
					default:
						werr = wd.Err
					}
					if werr != nil || deleted {
						break
					}
				}
				drainAfter(rw.cancel, changes)
				if deleted {
					return werr
				}
				if werr == nil {
					werr = topo.NewError(topo.Interrupted, p)
				}
				if ctx.Err() != nil {
					return endOfWatch(ctx, werr)
				}
				if rw.restarted() {
					continue // the store is back: watch again at once
				}
				if !isStoreErr(werr) {
					return werr
				}
				if err := o.rewatchWait(wctx, ctx, p, werr); err != nil {
					return endOfWatch(ctx, err)
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "watch every file under DIR (its subtree: DIR/...), as ls -R, rm -R and copy take a directory")
	cmd.Flags().BoolVar(&rawPrefix, "prefix", false, "watch every file whose path starts with PREFIX, a plain string prefix (\"/keyspaces/c\" matches \"/keyspaces/commerce/...\"), like etcdctl watch --prefix")
	cmd.Flags().StringVar(&decode, "decode", "", "decode each value: json (bare --decode: readable JSON, the type chosen by the record's path; --protoset adds types) or raw (protobuf wire dump)")
	cmd.Flags().Lookup("decode").NoOptDefVal = decodeDefault
	cmd.Flags().StringVar(&protoset, "protoset", "", "FileDescriptorSet file adding message types for --decode json")
	cmd.Flags().BoolVar(&o.full, "full", false, "print whole values (by default a text line shows the first 200 bytes)")
	cmd.Flags().Int64Var(&rev, "rev", 0, "etcd only: print the changes from this revision on, from etcd's history, then the live ones")
	cmd.Flags().BoolVar(&wait, "wait", false, "when FILE does not exist yet, wait for it to be created instead of failing with NoNode")
	return cmd
}

// watchArgs takes one or more FILEs. As decodeArgs does for one-path
// commands, it reads "watch --decode yaml FILE" as a misspelt --decode
// mode, not as two files: a first of several arguments with no "/" after a
// --decode is refused (a file at the root is written "/NAME" then).
func watchArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 1 && cmd.Flags().Changed("decode") && !strings.Contains(args[0], "/") {
		return usagef("--decode %q: want raw or json, or a bare --decode (json) (to watch a file at the root with --decode, write it /%s)", args[0], args[0])
	}
	return minArgs(1)(cmd, args)
}

// probe runs one store call bounded by timeout (--timeout; 0: no bound).
func probe(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	cctx, cancel := callCtx(ctx, timeout)
	defer cancel()
	return call(cctx)
}

// openWatch opens the store for a watch and makes a bounded read first
// (read, through probe): the watch itself has no deadline, so an
// unreachable store is reported here. It returns the context to watch with
// (ctx without a deadline) and its cancel. On error nothing stays open.
func (o *watching) openWatch(ctx context.Context, read func(context.Context, topo.Conn) error) (*store, context.Context, context.CancelFunc, error) {
	st, err := o.stores.open(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := probe(ctx, o.stores.timeout, func(c context.Context) error { return read(c, st.conn) }); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	return st, wctx, cancel, nil
}

// drainAfter cancels a watch and reads its channel until the backend
// closes it, as the Conn contract asks.
func drainAfter[T any](cancel context.CancelFunc, ch <-chan T) {
	cancel()
	for range ch {
	}
}

// isStoreErr reports whether a watch ended by err may resume by watching
// again (the store failed or could not be reached), rather than by a
// refusal that a retry would meet again.
func isStoreErr(err error) bool {
	switch topo.CodeOf(err) {
	case topo.PermissionDenied, topo.InvalidPath, topo.InvalidArgument, topo.NoImplementation:
		return false
	}
	return true
}

// rewatchBackoff is how long a watch waits before watching again after a
// failure.
const rewatchBackoff = time.Second

// rewatchWait says on stderr that the watch of p failed with err and is
// reconnecting, then waits rewatchBackoff. It returns an error once ctx
// (the user's) or wctx ends.
func (o *watching) rewatchWait(wctx, ctx context.Context, p string, err error) error {
	o.out.eprintf("topoctl: watch of %s failed (%s): reconnecting\n", displayPath(p), o.out.errorLine(err))
	select {
	case <-wctx.Done():
		if ctx.Err() != nil {
			return topo.NewError(topo.Interrupted, p)
		}
		return wctx.Err()
	case <-time.After(rewatchBackoff):
		return nil
	}
}

// rewatcher lets the monitor restart a watch: each attempt watches with a
// context of its own, which restart cancels (marking the attempt as
// restarted, so that the loop watches again at once, without a failure
// note). Its methods are safe for concurrent use.
type rewatcher struct {
	mu      sync.Mutex
	cancelf context.CancelFunc
	again   bool
}

// attempt returns the context of the next watch attempt, under ctx.
func (r *rewatcher) attempt(ctx context.Context) context.Context {
	actx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.cancelf, r.again = cancel, false
	r.mu.Unlock()
	return actx
}

// restart ends the current attempt.
func (r *rewatcher) restart() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelf != nil {
		r.again = true
		r.cancelf()
	}
}

// cancel ends the current attempt (the watch loop's own end of it).
func (r *rewatcher) cancel() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelf != nil {
		r.cancelf()
	}
}

// restarted reports whether restart ended the current attempt.
func (r *rewatcher) restarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.again
}

// monitorProbeTimeout bounds the monitor's probe read: longer and the
// store counts as unreachable.
const monitorProbeTimeout = 5 * time.Second

// monitor checks every second, until ctx ends or the returned stop is
// called, that the store answers: that its address accepts TCP
// connections, and that a read of probePath (a Get, bounded by
// monitorProbeTimeout or a shorter --timeout; NoNode is an answer) comes
// back. It says on stderr when the store stops answering ("lost the
// connection ...: reconnecting") and when it answers again ("reconnected"),
// then calls restart, so that the watch starts again at once and prints
// what changed meanwhile: a backend's watch may be waiting on a
// connection that a partition cut, or retry silently, which would leave
// the user looking at a quiet watch.
func (o *watching) monitor(ctx context.Context, st *store, probePath string, restart func()) (stop func()) {
	if st.addr == "" {
		return func() {}
	}
	if probePath == "" {
		probePath = "topoctl-probe"
	}
	bound := monitorProbeTimeout
	if o.stores.timeout > 0 && o.stores.timeout < bound {
		bound = o.stores.timeout
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		down := false
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := o.stores.checkListening(ctx, st.spec)
			if err == nil {
				pctx, pcancel := context.WithTimeout(ctx, bound)
				_, _, err = st.conn.Get(pctx, probePath)
				pcancel()
				if !isStoreErr(err) || topo.IsErrType(err, topo.NoNode) {
					err = nil // an answer, if not a file
				}
			}
			if ctx.Err() != nil {
				return
			}
			switch {
			case err != nil && !down:
				down = true
				o.out.eprintf("topoctl: lost the connection to %s (%s): reconnecting\n", st.spec.addr, o.out.errorLine(err))
			case err == nil && down:
				down = false
				o.out.eprintf("topoctl: reconnected to %s\n", st.spec.addr)
				restart()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitCreated returns once the file p exists, saying on stderr that it
// waits; it returns an error when ctx ends or the store fails.
func (o *watching) waitCreated(ctx context.Context, conn topo.Conn, p string) error {
	o.out.eprintf("topoctl: %s does not exist yet: waiting for it to be created\n", displayPath(p))
	wctx, cancel := context.WithCancel(ctx)
	initial, changes, err := conn.WatchRecursive(wctx, p)
	if err != nil {
		cancel()
		return at(err, p)
	}
	defer drainAfter(cancel, changes)
	for _, wd := range initial {
		if wd.Path == p {
			return nil
		}
	}
	for wd := range changes {
		switch {
		case wd.Err == nil && wd.Path == p:
			return nil
		case wd.Err != nil && !(topo.IsErrType(wd.Err, topo.NoNode) && wd.Path != ""):
			return wd.Err
		}
	}
	return topo.NewError(topo.Interrupted, p)
}
