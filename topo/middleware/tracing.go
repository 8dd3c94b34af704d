package middleware

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/topokit/topokit/topo"
)

// TracerName is the instrumentation name of Tracing's tracer.
const TracerName = "github.com/topokit/topokit/topo"

// Tracing returns a decorator that runs every call in an OpenTelemetry
// span named "topo.<Op>" (for example "topo.Get"), a child of the span in
// the call's context, with the attributes topo.backend, topo.cell and
// topo.path. A failed call records its error on the span, sets the span's
// status to Error and adds topo.code (the error code's identifier, e.g.
// "NoNode"). tp is the TracerProvider to use; nil means the global one
// (otel.GetTracerProvider), looked up once per decorated connection.
func Tracing(tp trace.TracerProvider) topo.Middleware {
	return Middleware(func(info topo.ConnInfo) Hooks {
		p := tp
		if p == nil {
			p = otel.GetTracerProvider()
		}
		tracer := p.Tracer(TracerName)
		base := []attribute.KeyValue{
			attribute.String("topo.backend", info.Implementation),
			attribute.String("topo.cell", info.Cell),
		}
		return Hooks{Around: func(ctx context.Context, c Call, next func(context.Context) error) error {
			ctx, span := tracer.Start(ctx, "topo."+string(c.Op),
				trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(base...),
				trace.WithAttributes(attribute.String("topo.path", c.Path)))
			defer span.End()
			err := next(ctx)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
				span.SetAttributes(attribute.String("topo.code", codeLabel(err)))
			}
			return err
		}}
	})
}
