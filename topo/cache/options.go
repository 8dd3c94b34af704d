package cache

import (
	"log/slog"
	"time"
)

// Options tune New. The zero value is usable.
type Options struct {
	// Mode is the default consistency mode of every read; a call can
	// choose another with WithMode. Cached when zero.
	Mode Mode

	// MaxStaleness is how long after an outage began (the watch failed, a
	// probe failed with Unavailable or Timeout, or a call passed through
	// returned Unavailable) cached reads are still answered from memory,
	// marked stale. Afterwards they go to the store
	// and return its error. Zero means 10 s; negative means never answer
	// stale (reads go to the store as soon as the Cache is not Healthy).
	MaxStaleness time.Duration

	// MaxBytes bounds the bytes the Cache holds (each file's path and
	// value). Zero means no bound. See the package documentation for what
	// happens beyond it.
	MaxBytes int64

	// WatcherBuffer is the number of events a local watcher may have
	// pending before it is dropped with ErrSlowWatcher. Zero means 256.
	// Each local watcher's channel takes about 8 bytes per event of it.
	WatcherBuffer int

	// ProbeInterval is how often the Cache reads one path from the store to
	// find out whether the store can be reached (backends resume their
	// watches on their own, so a watch alone does not tell). Each probe is
	// one Get. It also asks for a relist while a deletion of this Cache
	// waits as unsure (see Delete). Zero means 1 s; negative disables
	// probing (such a relist is then asked for at once).
	ProbeInterval time.Duration

	// RetryInterval is the pause between attempts to watch the prefix
	// again after the watch failed. Zero means 200 ms.
	RetryInterval time.Duration

	// ListDirFromMemory answers ListDir of directories under the prefix
	// from memory. Such listings hold files and directories of files only:
	// the lock and election entries the store would list are left out.
	ListDirFromMemory bool

	// LeaveConnOpen makes Close leave the wrapped Conn open, for a caller
	// that lends the Conn and closes it itself (several Caches over one
	// Conn, or a Conn used beside the Cache). By default the Cache owns
	// the Conn and Close closes it. After Close, calls on the Cache go to
	// the wrapped Conn as in Bypass mode.
	LeaveConnOpen bool

	// Hooks receive the Cache's events, for metrics.
	Hooks Hooks

	// Logger receives the Cache's log lines; slog.Default() when nil.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxStaleness == 0 {
		o.MaxStaleness = 10 * time.Second
	}
	if o.WatcherBuffer <= 0 {
		o.WatcherBuffer = 256
	}
	if o.ProbeInterval == 0 {
		o.ProbeInterval = time.Second
	}
	if o.RetryInterval <= 0 {
		o.RetryInterval = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}
