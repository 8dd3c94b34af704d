package topoctl

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// electEvent is one line of elect output.
type electEvent struct {
	Event string `json:"event"`
	ID    string `json:"id,omitempty"`
}

func (o *options) printElect(ev electEvent) {
	if o.jsonOut() {
		_ = o.printJSON(ev)
		return
	}
	if ev.ID == "" {
		o.printf("%s\n", ev.Event)
		return
	}
	o.printf("%s %s\n", ev.Event, ev.ID)
}

func newElectCmd(o *options) *cobra.Command {
	var id string
	cmd := &cobra.Command{
		Use:     "elect NAME [--id ID]",
		Example: `  topoctl elect primary --id $(hostname)`,
		Short:   "Take part in a leader election and print leadership changes",
		Long: `Join the leader election NAME as participant ID (default HOST-PID, this
host's name and topoctl's process id) and stay in it until
interrupted (Ctrl-C, SIGTERM), then withdraw. It prints one line per event:
"leader ID" whenever the leader changes (ID may be this participant or
another one), "elected ID" when this participant becomes the leader and
"lost ID" when it loses leadership without being asked to (its session or
lease ended), after which topoctl fails with LockLost. With --output json
every line is a JSON object {"event","id"}.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if id == "" {
				host, _ := os.Hostname()
				id = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			ctx := cmd.Context()
			st, err := o.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			// A bounded read first: an unreachable store is reported
			// instead of waiting for ever.
			lp, err := st.conn.NewLeaderParticipation(args[0], id)
			if err != nil {
				return err
			}
			defer lp.Stop()
			if err := o.probe(ctx, func(c context.Context) error {
				_, err := lp.GetCurrentLeaderID(c)
				return err
			}); err != nil {
				return err
			}

			wctx, wcancel := context.WithCancel(ctx)
			defer wcancel()
			leaders, err := lp.WaitForNewLeader(wctx)
			if err != nil {
				return err
			}
			watchDone := make(chan struct{})
			go func() {
				defer close(watchDone)
				for l := range leaders {
					o.printElect(electEvent{Event: "leader", ID: l})
				}
			}()

			// WaitForLeadership does not take a context: Stop ends it
			// when the user interrupts.
			stopped := make(chan struct{})
			go func() {
				select {
				case <-ctx.Done():
					lp.Stop()
				case <-stopped:
				}
			}()
			var result error
			lctx, err := lp.WaitForLeadership()
			switch {
			case err != nil:
				if ctx.Err() == nil {
					result = err
				}
			default:
				o.printElect(electEvent{Event: "elected", ID: id})
				select {
				case <-ctx.Done():
				case <-lctx.Done():
					if ctx.Err() == nil {
						o.printElect(electEvent{Event: "lost", ID: id})
						result = backendkit.Wrap(topo.LockLost, args[0], fmt.Errorf("participant %s lost leadership", id))
					}
				}
			}
			close(stopped)
			lp.Stop()
			wcancel()
			<-watchDone
			return result
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "this participant's id (default: HOST-PID)")
	return cmd
}

func newLeaderCmd(o *options) *cobra.Command {
	var observe bool
	cmd := &cobra.Command{
		Use: "leader NAME [--observe]",
		Example: `  topoctl leader primary
  topoctl leader --observe primary`,
		Short: "Print the current leader of an election",
		Long: `Print the id of the current leader of the election NAME, or nothing
(and a note on standard error) when nobody leads. With --output json it
prints {"name","leader"}, the leader being "" when nobody leads.

--observe prints the current leader, then each new leader as leadership
changes ("" lines are not printed: a gap with no leader shows as the next
leader's line), until Ctrl-C (exit 0).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			lp, err := st.conn.NewLeaderParticipation(args[0], "topoctl-leader-query")
			if err != nil {
				return err
			}
			defer lp.Stop()
			if observe {
				return o.observeLeader(cmd.Context(), lp, args[0])
			}
			var leader string
			if err := o.probe(cmd.Context(), func(c context.Context) error {
				var err error
				leader, err = lp.GetCurrentLeaderID(c)
				return err
			}); err != nil {
				return err
			}
			if o.jsonOut() {
				return o.printJSON(map[string]string{"name": args[0], "leader": leader})
			}
			if leader == "" {
				o.eprintf("election %s has no leader\n", args[0])
				return nil
			}
			o.printf("%s\n", leader)
			return nil
		},
	}
	cmd.Flags().BoolVar(&observe, "observe", false, "print each new leader until interrupted")
	return cmd
}

// observeLeader prints the leader of election name each time it changes,
// until ctx ends.
func (o *options) observeLeader(ctx context.Context, lp topo.LeaderParticipation, name string) error {
	ch, err := lp.WaitForNewLeader(ctx)
	if err != nil {
		return err
	}
	for id := range ch {
		if id == "" {
			continue
		}
		if o.jsonOut() {
			if err := o.printJSON(map[string]string{"name": name, "leader": id}); err != nil {
				return err
			}
			continue
		}
		o.printf("%s\n", id)
	}
	if ctx.Err() == nil {
		return backendkit.Wrap(topo.Unavailable, name, errors.New("the store ended the leader watch"))
	}
	return nil
}
