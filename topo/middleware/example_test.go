package middleware_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
)

// A Server whose every cell is decorated with metrics (registered in a
// registry of the program's own; serve it with promhttp.HandlerFor) and a
// read-only switch, which also covers cells opened after it was set.
func Example() {
	ctx := context.Background()
	metrics := middleware.NewMetrics(middleware.MetricsOptions{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	var readOnly middleware.ReadOnly

	ts, err := topo.OpenServer("memory", "example", "/global",
		topo.WithMiddleware(metrics.Middleware(), readOnly.Middleware(), middleware.ReadLimit(0)))
	if err != nil {
		log.Fatal(err)
	}
	defer ts.Close()
	if err := ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: "example", Root: "/zone1"}); err != nil {
		log.Fatal(err)
	}

	readOnly.Set(true)
	zone1, err := ts.ConnForCell(ctx, "zone1") // opened after the switch
	if err != nil {
		log.Fatal(err)
	}
	_, err = zone1.Create(ctx, "config", []byte("3"))
	fmt.Println("create refused:", errors.Is(err, topo.ReadOnly))
	_, _, err = zone1.Get(ctx, "config")
	fmt.Println("get still reads:", errors.Is(err, topo.NoNode))
	readOnly.Set(false)
	_, err = zone1.Create(ctx, "config", []byte("3"))
	fmt.Println("create after the switch:", err)

	fmt.Println("refused creates on zone1:", value(reg, "topo_calls_total",
		map[string]string{"cell": "zone1", "op": "Create", "code": "ReadOnly"}))
	// Output:
	// create refused: true
	// get still reads: true
	// create after the switch: <nil>
	// refused creates on zone1: 1
}

// value returns the value of the counter series name{labels...} among
// reg's metrics (0 when there is none).
func value(reg *prometheus.Registry, name string, labels map[string]string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
