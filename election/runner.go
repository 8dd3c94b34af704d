package election

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Default backoff bounds of Runner.
const (
	DefaultInitialBackoff = 100 * time.Millisecond
	DefaultMaxBackoff     = 10 * time.Second
)

// resignTimeout bounds the best-effort Resign when Run returns.
const resignTimeout = 5 * time.Second

// Runner runs the usual master loop over an Election: Await mastership, run
// Work under the mastership context, and campaign again once Work returns,
// until its context ends. Transient errors (from Await, WithMastership,
// Resign or Work) are logged and retried after an exponential backoff with
// jitter, from InitialBackoff doubling up to MaxBackoff; the backoff starts
// over after a term of mastership that ended normally. Set the fields before
// calling Run; a Runner must not be copied or run twice at once.
type Runner struct {
	// Election is the candidacy to run. Run does not close it.
	Election Election

	// Work does the master's work. It is called each time this instance
	// becomes master, with a context that is cancelled when mastership ends
	// (and when Run's context ends), and should return soon after that
	// context is cancelled. If Work returns while still master (with or
	// without an error), the Runner resigns, waits out a backoff and
	// campaigns again. An error that Permanent classifies as permanent ends
	// Run.
	Work func(ctx context.Context) error

	// InitialBackoff is the first retry delay; zero means
	// DefaultInitialBackoff.
	InitialBackoff time.Duration

	// MaxBackoff caps the retry delay; zero means DefaultMaxBackoff.
	MaxBackoff time.Duration

	// Permanent reports errors that end Run instead of being retried; nil
	// means IsPermanent.
	Permanent func(error) bool

	// Logger receives one record per mastership change and per retried
	// error; nil means slog.Default().
	Logger *slog.Logger
}

// Run runs the loop until ctx ends, then resigns (best effort, for up to
// 5 s even though ctx has ended) and returns nil. It returns early with the
// error when Await, WithMastership, Resign or Work fails with a permanent
// error (see Permanent), for example topo.PermissionDenied when the store
// refuses the candidacy (an ACL or auth denial: it is not retried, once is
// enough) and topo.Closed once the Election or its Conn is closed, and an
// InvalidArgument *topo.Error at once when Election or Work is nil. Run
// does not close the Election.
func (r *Runner) Run(ctx context.Context) error {
	if r.Election == nil || r.Work == nil {
		return &topo.Error{Code: topo.InvalidArgument, Err: errors.New("election: Runner needs an Election and a Work function")}
	}
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     r.InitialBackoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         r.MaxBackoff,
	}
	if b.InitialInterval <= 0 {
		b.InitialInterval = DefaultInitialBackoff
	}
	if b.MaxInterval <= 0 {
		b.MaxInterval = DefaultMaxBackoff
	}
	if b.MaxInterval < b.InitialInterval {
		b.MaxInterval = b.InitialInterval
	}
	b.Reset()

	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
		defer cancel()
		if err := r.Election.Resign(rctx); err != nil && !IsPermanent(err) {
			log.Warn("election: resign on exit failed", "err", err)
		}
	}()

	for {
		if ctx.Err() != nil {
			return nil
		}
		err := r.term(ctx, log)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			b.Reset()
			continue
		}
		if r.permanent(err) {
			log.Error("election: giving up", "err", err)
			return err
		}
		delay := b.NextBackOff()
		log.Warn("election: retrying after error", "err", err, "backoff", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// term runs one campaign and term of mastership. It returns nil when a term
// ended because mastership was lost or given up, and an error to retry (or
// give up on) otherwise.
func (r *Runner) term(ctx context.Context, log *slog.Logger) error {
	if err := r.Election.Await(ctx); err != nil {
		return err
	}
	mctx, err := r.Election.WithMastership(ctx)
	if err != nil {
		return err
	}
	if mctx.Err() != nil {
		// Lost between Await and WithMastership.
		return backendkit.Wrap(topo.LockLost, "", context.Cause(mctx))
	}
	log.Info("election: became master")
	werr := r.Work(mctx)
	if mctx.Err() != nil {
		// The term ended; Work's error, if any, is most likely the
		// cancellation itself.
		log.Info("election: mastership ended", "cause", context.Cause(mctx), "work_err", werr)
		if werr != nil && r.permanent(werr) {
			return werr
		}
		return nil
	}
	// Work returned while still master: hand mastership over before trying
	// again, so that a failing instance does not keep it.
	if rerr := r.Election.Resign(ctx); rerr != nil {
		return errors.Join(werr, rerr)
	}
	if werr == nil {
		werr = errors.New("election: Work returned while still master")
	}
	log.Info("election: resigned after Work returned", "work_err", werr)
	return werr
}

func (r *Runner) permanent(err error) bool {
	if r.Permanent != nil {
		return r.Permanent(err)
	}
	return IsPermanent(err)
}
