package cli

import (
	"context"
	"errors"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
)

// watchEvent is one line of watch output.
type watchEvent struct {
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
	Value   []byte `json:"value,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

func (o *options) printEvent(ev watchEvent) error {
	if o.jsonOut() {
		return o.printJSON(ev)
	}
	if ev.Deleted {
		o.printf("%s deleted\n", ev.Path)
		return nil
	}
	o.printf("%s %s %s\n", ev.Path, ev.Version, strconv.Quote(string(ev.Value)))
	return nil
}

// endOfWatch turns the error that ended a watch into the command's result:
// an interruption by the user (ctx cancelled) is a normal end.
func endOfWatch(ctx context.Context, err error) error {
	if ctx.Err() != nil && (topo.IsErrType(err, topo.Interrupted) || errors.Is(err, context.Canceled)) {
		return nil
	}
	return err
}

func newWatchCmd(o *options) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "watch FILE | watch -R PREFIX",
		Short: "Print a file's changes (or every file's under a prefix) until interrupted",
		Long: `Print the current value of FILE, then one line per change, until
interrupted (Ctrl-C, SIGTERM) or the file is deleted. Each line is
"PATH VERSION VALUE" with the value quoted, or "PATH deleted".

watch -R PREFIX prints every file whose path starts with PREFIX (a plain
string prefix: "/keyspaces/c" matches "/keyspaces/commerce/..."), then one
line per change, creation or deletion of such a file, until interrupted.
With --output json every line is a JSON object. The initial read is bounded
by --timeout; the watch itself is not.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if recursive {
				prefix, err := topo.CleanPrefix(args[0])
				if err != nil {
					return err
				}
				st, wctx, cancel, err := o.openWatch(ctx, func(c context.Context, conn topo.Conn) error {
					_, err := conn.List(c, prefix)
					if topo.IsErrType(err, topo.NoNode) {
						return nil
					}
					return at(err, prefix)
				})
				if err != nil {
					return err
				}
				defer st.Close()
				defer cancel()
				initial, changes, err := st.conn.WatchRecursive(wctx, prefix)
				if err != nil {
					return at(err, prefix)
				}
				defer drainAfter(cancel, changes)
				for _, wd := range initial {
					if err := o.printEvent(watchEvent{Path: displayPath(wd.Path), Version: wd.Version.String(), Value: wd.Contents}); err != nil {
						return err
					}
				}
				for wd := range changes {
					var err error
					switch {
					case wd.Err == nil:
						err = o.printEvent(watchEvent{Path: displayPath(wd.Path), Version: wd.Version.String(), Value: wd.Contents})
					case topo.IsErrType(wd.Err, topo.NoNode) && wd.Path != "":
						err = o.printEvent(watchEvent{Path: displayPath(wd.Path), Deleted: true})
					default:
						return endOfWatch(ctx, wd.Err)
					}
					if err != nil {
						return err
					}
				}
				return endOfWatch(ctx, topo.NewError(topo.Interrupted, prefix))
			}

			p, err := topo.CleanFilePath(args[0])
			if err != nil {
				return err
			}
			st, wctx, cancel, err := o.openWatch(ctx, func(c context.Context, conn topo.Conn) error {
				_, _, err := conn.Get(c, p)
				return err
			})
			if err != nil {
				return err
			}
			defer st.Close()
			defer cancel()
			cur, changes, err := st.conn.Watch(wctx, p)
			if err != nil {
				return err
			}
			defer drainAfter(cancel, changes)
			if err := o.printEvent(watchEvent{Path: displayPath(p), Version: cur.Version.String(), Value: cur.Contents}); err != nil {
				return err
			}
			for wd := range changes {
				switch {
				case wd.Err == nil:
					if err := o.printEvent(watchEvent{Path: displayPath(p), Version: wd.Version.String(), Value: wd.Contents}); err != nil {
						return err
					}
				case topo.IsErrType(wd.Err, topo.NoNode):
					return o.printEvent(watchEvent{Path: displayPath(p), Deleted: true})
				default:
					return endOfWatch(ctx, wd.Err)
				}
			}
			return endOfWatch(ctx, topo.NewError(topo.Interrupted, p))
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "watch every file under PREFIX")
	return cmd
}

// probe runs one store call bounded by --timeout.
func (o *options) probe(ctx context.Context, call func(context.Context) error) error {
	cctx, cancel := o.callCtx(ctx)
	defer cancel()
	return call(cctx)
}

// openWatch opens the store for a watch and makes a bounded read first
// (read, through probe): the watch itself has no deadline, so an
// unreachable store is reported here. It returns the context to watch with
// (ctx without a deadline) and its cancel. On error nothing stays open.
func (o *options) openWatch(ctx context.Context, read func(context.Context, topo.Conn) error) (*store, context.Context, context.CancelFunc, error) {
	st, err := o.open(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := o.probe(ctx, func(c context.Context) error { return read(c, st.conn) }); err != nil {
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
