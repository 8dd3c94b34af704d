package election_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/realstores"
	"github.com/topokit/topokit/topo"
)

// TestObserveTorture: participants campaign with values, proclaim, and
// end their terms every way (Resign, Stop, session lost, Conn closed)
// while observers follow with Observe and Leader. Afterwards, every
// observed leader is a term some participant was granted (its id and
// token), with a value that participant published in that term, and
// along one Observe channel the tokens never go back.
func TestObserveTorture(t *testing.T) {
	for name, mk := range realstores.All("/obs") {
		t.Run(name, func(t *testing.T) {
			st := mk(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			const parts, rounds = 4, 10
			type term struct {
				id     string
				values map[string]bool
			}
			var mu sync.Mutex
			terms := map[int64]*term{}           // granted terms by token
			observed := make([][]topo.Leader, 2) // per observer
			var leaders []topo.Leader

			octx, ocancel := context.WithCancel(ctx)
			var owg sync.WaitGroup
			for idx := range observed {
				oc := st.Open(t)
				p, err := oc.NewLeaderParticipation("e", "observer")
				require.NoError(t, err)
				ch, err := p.Observe(octx)
				require.NoError(t, err)
				owg.Go(func() {
					for l := range ch {
						mu.Lock()
						observed[idx] = append(observed[idx], l)
						mu.Unlock()
					}
				})
				owg.Go(func() {
					for octx.Err() == nil {
						l, err := p.Leader(octx)
						if err == nil {
							mu.Lock()
							leaders = append(leaders, l)
							mu.Unlock()
						}
						time.Sleep(time.Millisecond) // a poll, not a hot loop
					}
				})
			}

			errs := make(chan error, parts*rounds)
			var wg sync.WaitGroup
			for i := range parts {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(i), 3))
					id := fmt.Sprintf("p%d", i)
					conn := st.Open(t)
					for r := range rounds {
						p, err := conn.NewLeaderParticipation("e", id)
						if err != nil {
							errs <- err
							return
						}
						v0 := fmt.Sprintf("%s-r%d-c", id, r)
						lctx, err := p.Campaign(ctx, []byte(v0))
						if err != nil {
							errs <- fmt.Errorf("%s round %d: Campaign: %w", id, r, err)
							return
						}
						f, err := p.Term()
						if err != nil {
							// Lost at once.
							p.Stop()
							continue
						}
						tm := &term{id: id, values: map[string]bool{v0: true}}
						mu.Lock()
						terms[f.Token()] = tm
						mu.Unlock()
						for k := range rng.IntN(3) {
							v := fmt.Sprintf("%s-r%d-p%d", id, r, k)
							mu.Lock()
							tm.values[v] = true
							mu.Unlock()
							_ = p.Proclaim(ctx, []byte(v))
							time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
						}
						time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
						_ = lctx
						switch rng.IntN(4) {
						case 0:
							_ = p.Resign(ctx)
						case 1:
							p.Stop()
						case 2:
							if st.Expire != nil {
								st.Expire(t, conn)
								<-lctx.Done()
								p.Stop()
								continue
							}
							fallthrough
						case 3:
							conn.Close()
							conn = st.Open(t)
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			ocancel()
			owg.Wait()
			mu.Lock()
			defer mu.Unlock()
			check := func(l topo.Leader, what string) {
				if l.ID == "" {
					return
				}
				tm := terms[l.Token]
				require.NotNilf(t, tm, "%s: leader %q token %d value %q: no participant was granted that term", what, l.ID, l.Token, l.Value)
				require.Equalf(t, tm.id, l.ID, "%s: token %d was %s's term", what, l.Token, tm.id)
				require.Truef(t, tm.values[string(l.Value)], "%s: value %q of %s's term %d was never published in it", what, l.Value, l.ID, l.Token)
			}
			total := 0
			for i, evs := range observed {
				var last int64
				for _, l := range evs {
					check(l, fmt.Sprintf("Observe %d", i))
					if l.ID != "" {
						require.GreaterOrEqualf(t, l.Token, last, "Observe %d went back to an older term: %v", i, evs)
						last = l.Token
					}
				}
				total += len(evs)
			}
			for _, l := range leaders {
				check(l, "Leader")
			}
			t.Logf("%d terms, %d Observe events, %d Leader reads", len(terms), total, len(leaders))
		})
	}
}
