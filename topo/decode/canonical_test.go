package decode_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// canonicalWire returns b, a message md in wire format, with the entries
// of every map field (at any depth) in byte order. Protobuf leaves the
// order of map entries unspecified, and Vitess writes them in Go's random
// map order; every other byte is kept, so two encodings are the same up
// to map order exactly when their canonical forms are equal.
func canonicalWire(t *testing.T, b []byte, md protoreflect.MessageDescriptor) []byte {
	t.Helper()
	type field struct {
		num   protowire.Number
		bytes []byte
	}
	var fields []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		require.GreaterOrEqual(t, n, 0)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		require.GreaterOrEqual(t, m, 0)
		raw := b[:n+m]
		if fd := md.Fields().ByNumber(num); fd != nil && fd.Message() != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			raw = protowire.AppendBytes(protowire.AppendTag(nil, num, typ), canonicalWire(t, v, fd.Message()))
		}
		fields = append(fields, field{num, raw})
		b = b[n+m:]
	}
	// Sort each run of one map field's entries.
	for i := 0; i < len(fields); {
		fd := md.Fields().ByNumber(fields[i].num)
		j := i + 1
		for j < len(fields) && fields[j].num == fields[i].num {
			j++
		}
		if fd != nil && fd.IsMap() {
			slices.SortFunc(fields[i:j], func(a, b field) int { return bytes.Compare(a.bytes, b.bytes) })
		}
		i = j
	}
	var out []byte
	for _, f := range fields {
		out = append(out, f.bytes...)
	}
	return out
}
