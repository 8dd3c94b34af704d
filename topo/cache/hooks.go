package cache

import "time"

// Outcome is how a read was answered, as Hooks see it.
type Outcome int

const (
	// Hit: answered from memory while Healthy.
	Hit Outcome = iota
	// StaleHit: answered from memory while not Healthy.
	StaleHit
	// Miss: answered from the store (a path of a pending write, a Cache
	// that cannot serve, or a read in Consistent mode).
	Miss
	// Passed: outside the prefix, Bypass mode, or a call the Cache never
	// answers from memory.
	Passed
)

// String returns "hit", "stale", "miss" or "passed".
func (o Outcome) String() string {
	switch o {
	case StaleHit:
		return "stale"
	case Miss:
		return "miss"
	case Passed:
		return "passed"
	}
	return "hit"
}

// Hooks receive a Cache's events. Every field is optional. They are called
// from the goroutines that read and from the Cache's own goroutine, some
// while the Cache holds its lock, so they must be quick, safe for
// concurrent use and must not call the Cache.
type Hooks struct {
	// OnRead is called once per Get, List and ListDir with op ("Get",
	// "List", "ListDir") and how it was answered.
	OnRead func(op string, o Outcome)
	// OnResync is called each time the Cache lists the prefix again after
	// its watch ended (not for the first fill), with the error that ended
	// the watch: Interrupted when the Cache ended it to catch up after an
	// outage (see docs/cache.md, "Outages").
	OnResync func(err error)
	// OnHealth is called when the Cache's health changes, with the new
	// health and State.Since: when the current outage began while
	// Resyncing or Stale (moving between the two keeps it), when the
	// Cache became Healthy, OverLimit or Closed otherwise.
	OnHealth func(h Health, since time.Time)
	// OnWatchers is called with the number of local watchers whenever it
	// changes.
	OnWatchers func(n int)
}
