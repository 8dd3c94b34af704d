package topoctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo/middleware"
)

// metricsAnnotation marks the long-running commands that serve
// --metrics-address. Its value is "" when the command always runs long, or
// the name of the flag that makes it do so (leader's "observe").
const metricsAnnotation = "topoctl/metrics"

// longRunning marks cmd as serving --metrics-address (when flag is set, if
// flag is not "").
func longRunning(cmd *cobra.Command, flag string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[metricsAnnotation] = flag
	return cmd
}

// servesMetrics reports whether cmd, as invoked, is a long-running
// command that serves --metrics-address.
func servesMetrics(cmd *cobra.Command) bool {
	flag, ok := cmd.Annotations[metricsAnnotation]
	return ok && (flag == "" || cmd.Flags().Changed(flag))
}

// metricsShutdownWait bounds how long the metrics server waits for
// scrapes in flight when the command ends.
const metricsShutdownWait = time.Second

// startMetrics creates the command's metrics (which the connector c then
// records into) and serves them on addr (--metrics-address) at /metrics (Prometheus text format) until ctx ends or
// stopMetrics runs. The topo metrics are registered in a registry of this
// command tree's own, never in the global one; the Go runtime's and the
// process's metrics are added there. serve also exposes what the global
// registry holds, which is where the embedded etcd server registers its
// own metrics (etcd_server_*, etcd_disk_*, ...).
func startMetrics(ctx context.Context, cmd *cobra.Command, c *connector, addr string) (stop func(), err error) {
	if !servesMetrics(cmd) {
		return nil, usagef("--metrics-address applies to the long-running commands only: serve, watch, lock, elect and leader --observe")
	}
	c.metrics = middleware.NewMetrics(middleware.MetricsOptions{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c.metrics)
	var g prometheus.Gatherer = reg
	if cmd.Name() == "serve" {
		// The global registry already holds the Go and process collectors.
		g = prometheus.Gatherers{reg, prometheus.DefaultGatherer}
	} else {
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			err = fmt.Errorf("%w (another program listens there: pick another port)", err)
		}
		return nil, exitError{code: ExitFailure, err: fmt.Errorf("--metrics-address: %w", err)}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.out.log.Error("metrics server failed", "address", ln.Addr().String(), "err", err)
		}
	}()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
		}
		sctx, cancel := context.WithTimeout(context.Background(), metricsShutdownWait)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			_ = hs.Close()
		}
	}()
	stop = sync.OnceFunc(func() {
		close(stopped)
		<-served
	})
	c.out.log.Info("serving metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	return stop, nil
}
