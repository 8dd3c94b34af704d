package topoctl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/inspect"
)

// electEvent is one line of elect output.
type electEvent struct {
	Event string `json:"event"`
	ID    string `json:"id,omitempty"`
}

func printElect(out *printer, ev electEvent) {
	if out.jsonOut() {
		_ = out.printJSON(ev)
		return
	}
	if ev.ID == "" {
		out.printf("%s\n", ev.Event)
		return
	}
	out.printf("%s %s\n", ev.Event, ev.ID)
}

// electTTLNote says how long after a killed topoctl its leadership or
// candidacy lapses with elect --ttl ttl on backend impl, when that is not
// ttl; "" when it is, or for other backends.
func electTTLNote(impl string, ttl time.Duration) string {
	if impl == "zk2" {
		return fmt.Sprintf("ZooKeeper ties the candidacy to the client's session: --ttl %s is the session timeout asked of the server, which clamps it to its bounds (by default 2 to 20 tickTimes)", ttl)
	}
	return effectiveTTLNote(impl, "leadership", ttl)
}

func newElectCmd(stores *connector, out *printer) *cobra.Command {
	var id, value string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use: "elect NAME [--id ID] [--value VALUE] [--ttl D]",
		Example: `  topoctl elect primary --id $(hostname)
  topoctl elect primary --value 10.0.0.7:8080
  topoctl elect primary --ttl 10s`,
		Short: "Take part in a leader election and print leadership changes",
		Long: `Join the leader election NAME as participant ID (default HOST-PID, this
host's name and topoctl's process id) and stay in it until
interrupted (Ctrl-C, SIGTERM), then withdraw. It prints one line per event:
"leader ID" whenever the leader changes (ID may be this participant or
another one), "elected ID" when this participant becomes the leader and
"lost ID" when it loses leadership without being asked to (its session or
lease ended), after which topoctl fails with LockLost. With --output json
every line is a JSON object {"event","id"}.

--value publishes VALUE as the leader's value while this participant leads
(etcd's "etcdctl elect NAME VALUE"; Campaign in the API): "topoctl leader"
and "topoctl leader --observe" show it beside the id. The value lives
where Vitess processes in the same election do not read it.

--ttl D sets how long this participant's candidacy, and its leadership,
outlive topoctl when it dies or loses the store (default: the backend's,
30s on etcd and ZooKeeper, 15s on Consul), so that another participant
takes over sooner, or later. etcd2 (the lease's TTL, whole seconds), zk2
(the session timeout, which the server clamps to its bounds) and consul
(the session's TTL: whole seconds, at least 10s, and Consul ends a session
up to twice its TTL late) take it, with a note on stderr when the
effective time differs; other backends refuse it (usage error, exit 2).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("ttl") {
				switch {
				case ttl <= 0:
					return usagef("--ttl must be positive")
				case stores.impl != "etcd2" && stores.impl != "zk2" && stores.impl != "consul":
					return usagef("elect --ttl applies to etcd2, zk2 and consul, not %s", stores.impl)
				}
				stores.claimTTL = ttl
				if note := electTTLNote(stores.impl, ttl); note != "" {
					out.eprintf("topoctl: note: %s\n", note)
				}
			}
			if id == "" {
				host, _ := os.Hostname()
				id = fmt.Sprintf("%s-%d", host, os.Getpid())
			}
			ctx := cmd.Context()
			st, err := stores.open(ctx)
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
			if err := probe(ctx, stores.timeout, func(c context.Context) error {
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
					printElect(out, electEvent{Event: "leader", ID: l})
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
			var lctx context.Context
			if cmd.Flags().Changed("value") {
				lctx, err = lp.Campaign(ctx, []byte(value))
			} else {
				lctx, err = lp.WaitForLeadership()
			}
			switch {
			case err != nil:
				if ctx.Err() == nil {
					result = err
				}
			default:
				printElect(out, electEvent{Event: "elected", ID: id})
				select {
				case <-ctx.Done():
				case <-lctx.Done():
					if ctx.Err() == nil {
						printElect(out, electEvent{Event: "lost", ID: id})
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
	cmd.Flags().StringVar(&value, "value", "", "the value to publish as leader (shown by topoctl leader)")
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "how long the candidacy and leadership outlive topoctl (default: the backend's; etcd2, zk2, consul)")
	return cmd
}

func newLeaderCmd(stores *connector, out *printer) *cobra.Command {
	var observe bool
	cmd := &cobra.Command{
		Use: "leader NAME [--observe]",
		Example: `  topoctl leader primary
  topoctl leader --observe primary`,
		Short: "Print the current leader of an election",
		Long: `Print the id of the current leader of the election NAME, followed by a
space and its published value when it has one (elect --value), or nothing
(and a note on standard error) when nobody leads. With --output json it
prints {"name","leader","value","token"}: the leader being "" when nobody
leads, the value "" when none is published, and the token the fencing
token of the leader's term (0 when nobody leads).

--observe prints the current leader, then the leader again each time
leadership changes or the leader publishes a new value (etcdctl's
"elect -l"), until Ctrl-C (exit 0); a time with nobody leading is not
printed in text (the next leader's line follows), and is a line with an
empty leader under --output json. As watch does, it says "reconnecting" on
stderr when the store stops answering (reading a path once a second, to
notice a partition) and "reconnected" when it answers again.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := stores.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if observe {
				lp, err := st.conn.NewLeaderParticipation(args[0], "topoctl-leader-query")
				if err != nil {
					return err
				}
				defer lp.Stop()
				return (&watching{stores: stores, out: out}).observeLeader(cmd.Context(), st, lp, args[0])
			}
			var leader topo.Leader
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				var err error
				leader, err = inspect.Leader(c, st.conn, args[0])
				return err
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(leaderLine(args[0], leader))
			}
			if leader.ID == "" {
				out.eprintf("election %s has no leader\n", args[0])
				return nil
			}
			printLeader(out, leader)
			return nil
		},
	}
	cmd.Flags().BoolVar(&observe, "observe", false, "print each new leader until interrupted")
	return cmd
}

// leaderJSON is the JSON form of a leader, for leader and leader --observe.
type leaderJSON struct {
	Name   string `json:"name"`
	Leader string `json:"leader"`
	Value  string `json:"value"`
	Token  int64  `json:"token"`
}

func leaderLine(name string, l topo.Leader) leaderJSON {
	return leaderJSON{Name: name, Leader: l.ID, Value: string(l.Value), Token: l.Token}
}

// printLeader prints a leader's id, and its value after a space when it
// published one.
func printLeader(out *printer, l topo.Leader) {
	if len(l.Value) == 0 {
		out.printf("%s\n", l.ID)
		return
	}
	out.printf("%s %s\n", l.ID, escapeControl(string(l.Value)))
}

// observeLeader prints the leader of election name each time it changes or
// publishes a new value, until ctx ends. As watch does, it says on stderr
// when the store stops answering ("reconnecting") and answers again
// ("reconnected"), then observes again at once, printing the leader only
// if it changed meanwhile.
func (o *watching) observeLeader(ctx context.Context, st *store, lp topo.LeaderParticipation, name string) error {
	rw := &rewatcher{}
	stopMonitor := o.monitor(ctx, st, "topoctl-probe", rw.restart)
	defer stopMonitor()
	var last *leaderJSON
	for {
		actx := rw.attempt(ctx)
		ch, err := lp.Observe(actx)
		if err != nil {
			rw.cancel()
			switch {
			case ctx.Err() != nil:
				return endOfWatch(ctx, err) // interrupted while observing again
			case rw.restarted():
				continue // the monitor ended this attempt as it began
			}
			return err
		}
		for l := range ch {
			line := leaderLine(name, l)
			if last != nil && *last == line {
				continue // seen before a restart
			}
			last = &line
			if o.out.jsonOut() {
				if err := o.out.printJSON(line); err != nil {
					drainAfter(rw.cancel, ch)
					return err
				}
				continue
			}
			if l.ID == "" {
				continue
			}
			printLeader(o.out, l)
		}
		rw.cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case rw.restarted():
			continue // the store is back: observe again at once
		}
		return backendkit.Wrap(topo.Unavailable, name, errors.New("the store ended the leader watch"))
	}
}
