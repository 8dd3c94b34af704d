// Command clustermanager is an example of a service that embeds topokit: a
// small HTTP server of which several instances form a cluster. Each
// instance registers itself under clustermanager/members/, competes for
// leadership (package election), and follows the per-member assignment
// files under clustermanager/assignments/. Only the leader reconciles the
// desired state (clustermanager/desired, a list of shards) into those
// assignment files, under a lock, and only the leader accepts changes to
// the desired state; followers redirect such requests to it.
//
// It runs on the local etcd of `topoctl serve` by default, and on any
// backend by flags:
//
//	topoctl serve &
//	clustermanager -listen 127.0.0.1:8081 &
//	clustermanager -listen 127.0.0.1:8082 &
//	curl -L -X PUT -d '{"shards":["a","b","c"]}' http://127.0.0.1:8082/desired
//	curl http://127.0.0.1:8081/assignments
//	curl http://127.0.0.1:8081/metrics
//
//	clustermanager -topo-implementation zk2 -topo-global-server-address 127.0.0.1:2181 -topo-global-root /vitess/global
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
)

// Defaults of the store flags: the etcd that `topoctl serve` runs.
const (
	defaultImplementation = "etcd2"
	defaultServerAddress  = "127.0.0.1:2379"
	defaultRoot           = "/vitess/global"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "clustermanager:", err)
		os.Exit(1)
	}
}

// run parses args, serves until ctx ends, then shuts down cleanly. It logs
// to stderr. When onListen is non-nil it is called with the HTTP address
// once the server listens.
func run(ctx context.Context, args []string, stderr io.Writer, onListen func(addr string)) error {
	fs := flag.NewFlagSet("clustermanager", flag.ContinueOnError)
	fs.SetOutput(stderr)
	impl := fs.String("topo-implementation", defaultImplementation, "topology backend: etcd2, zk2, consul or memory")
	addr := fs.String("topo-global-server-address", defaultServerAddress, "global cell server address, host:port[,host:port...]")
	root := fs.String("topo-global-root", defaultRoot, "global cell root")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address, host:port (port 0 picks a free one)")
	advertise := fs.String("advertise", "", "host:port other instances redirect clients to (default: the listen address)")
	id := fs.String("id", "", "unique instance id (default: derived from the advertised address)")
	resync := fs.Duration("resync", 5*time.Second, "how often the leader reconciles and probes members without changes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	if *advertise == "" {
		*advertise = ln.Addr().String()
	}
	if *id == "" {
		*id = idFromAddr(*advertise)
	}

	// The metrics of every topo connection (calls, locks, watches,
	// leadership), in a registry of the instance's own, served at /metrics.
	metrics := middleware.NewMetrics(middleware.MetricsOptions{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	ts, err := topo.OpenServer(*impl, *addr, *root, topo.WithMiddleware(metrics.Middleware()))
	if err != nil {
		return fmt.Errorf("opening the %s topology at %s%s: %w", *impl, *addr, *root, err)
	}
	defer ts.Close()

	m, err := NewManager(ctx, ts.GlobalCell(), Config{ID: *id, Addr: *advertise, Resync: *resync, Logger: log})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", m.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	log.Info("serving", "addr", ln.Addr().String(), "topo", *impl, "server", *addr, "root", *root)
	if onListen != nil {
		onListen(ln.Addr().String())
	}

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	runErr := make(chan error, 1)
	go func() { runErr <- m.Run(runCtx) }()

	select {
	case <-ctx.Done():
	case err = <-serveErr:
	case err = <-runErr:
		runErr <- err
	}
	// Stop answering first, then give up leadership and deregister.
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	cancelRun()
	if rerr := <-runErr; err == nil {
		err = rerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("stopped")
	return err
}

// idFromAddr turns host:port into a path-safe id.
func idFromAddr(addr string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '-'
	}, addr)
}
