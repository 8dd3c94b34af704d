package middleware

import (
	"context"
	"log/slog"
	"time"

	"github.com/topokit/topokit/topo"
)

// Logging returns a decorator that logs one debug record per call through
// logger (slog.Default() when nil), with the backend, cell, operation,
// path, duration and, for a failed call, its error code and error. Lock
// acquisitions and releases, watch ends and leadership changes are logged
// too. A call whose record is below the logger's level costs one Enabled
// check; watches are forwarded through a goroutine so that their end can
// be logged.
func Logging(logger *slog.Logger) topo.Middleware {
	return Middleware(func(topo.ConnInfo) Hooks {
		l := logger
		if l == nil {
			l = slog.Default()
		}
		attrs := func(c Call) []slog.Attr {
			return []slog.Attr{
				slog.String("backend", c.Info.Implementation),
				slog.String("cell", c.Info.Cell),
				slog.String("op", string(c.Op)),
				slog.String("path", c.Path),
			}
		}
		return Hooks{
			Around: func(ctx context.Context, c Call, next func(context.Context) error) error {
				if !l.Enabled(ctx, slog.LevelDebug) {
					return next(ctx)
				}
				start := time.Now()
				err := next(ctx)
				a := append(attrs(c), slog.Duration("duration", time.Since(start)))
				if err != nil {
					a = append(a, slog.String("code", codeLabel(err)), slog.Any("error", err))
				}
				l.LogAttrs(ctx, slog.LevelDebug, "topo call", a...)
				return err
			},
			OnLockReleased: func(c Call, held time.Duration, err error) {
				a := append(attrs(c), slog.Duration("held", held))
				if err != nil {
					a = append(a, slog.String("code", codeLabel(err)))
				}
				l.LogAttrs(context.Background(), slog.LevelDebug, "topo lock released", a...)
			},
			OnWatchEnd: func(c Call, err error) {
				a := attrs(c)
				if err != nil {
					a = append(a, slog.String("code", codeLabel(err)))
				}
				l.LogAttrs(context.Background(), slog.LevelDebug, "topo watch ended", a...)
			},
			OnLeadership: func(c Call, leading bool) {
				l.LogAttrs(context.Background(), slog.LevelDebug, "topo leadership", append(attrs(c), slog.Bool("leading", leading))...)
			},
		}
	})
}

// codeLabel names err's topo error code as its Go identifier ("NoNode",
// "BadVersion", ...; "OK" for nil, "Unknown" for an error without a code),
// the form used in metric labels and logs.
func codeLabel(err error) string {
	if err == nil {
		return "OK"
	}
	if name, ok := codeIdents[topo.CodeOf(err)]; ok {
		return name
	}
	return "Unknown"
}

var codeIdents = map[topo.ErrorCode]string{
	topo.NodeExists:        "NodeExists",
	topo.NoNode:            "NoNode",
	topo.NodeNotEmpty:      "NodeNotEmpty",
	topo.Timeout:           "Timeout",
	topo.Interrupted:       "Interrupted",
	topo.BadVersion:        "BadVersion",
	topo.PartialResult:     "PartialResult",
	topo.NoUpdateNeeded:    "NoUpdateNeeded",
	topo.NoImplementation:  "NoImplementation",
	topo.ResourceExhausted: "ResourceExhausted",
	topo.InvalidPath:       "InvalidPath",
	topo.InvalidArgument:   "InvalidArgument",
	topo.Closed:            "Closed",
	topo.Compacted:         "Compacted",
	topo.LockLost:          "LockLost",
	topo.Unavailable:       "Unavailable",
	topo.PermissionDenied:  "PermissionDenied",
	topo.ReadOnly:          "ReadOnly",
}
