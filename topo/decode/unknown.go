package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// UnknownFields are the fields of one message of a decoded record that its
// type does not have (a newer writer's), as Decode shows them.
type UnknownFields struct {
	// At is the JSON path of the message in the record: "" for the record
	// itself, else field names with [index] or ["key"], e.g.
	// "partitions[0].shardReferences[1]".
	At string `json:"at"`
	// Fields are the unknown fields, schema-less (see Raw).
	Fields []RawField `json:"fields"`
}

// collectUnknown appends the unknown fields of m and of every message in
// it to out, in field order (map entries by key); at is m's JSON path.
func collectUnknown(m protoreflect.Message, at string, out []UnknownFields) []UnknownFields {
	if u := m.GetUnknown(); len(u) > 0 {
		fs, err := Raw(u)
		if err != nil {
			// Unmarshal kept them as fields, so they parse; keep the
			// bytes in case.
			fs = []RawField{{Wire: "bytes", Bytes: u}}
		}
		out = append(out, UnknownFields{At: at, Fields: fs})
	}
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		name := fd.JSONName()
		if at != "" {
			name = at + "." + name
		}
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				continue
			}
			keys := make([]protoreflect.MapKey, 0, v.Map().Len())
			v.Map().Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				out = collectUnknown(v.Map().Get(k).Message(), fmt.Sprintf("%s[%s]", name, strconv.Quote(k.String())), out)
			}
		case fd.IsList():
			if fd.Message() == nil {
				continue
			}
			l := v.List()
			for i := range l.Len() {
				out = collectUnknown(l.Get(i).Message(), fmt.Sprintf("%s[%d]", name, i), out)
			}
		case fd.Message() != nil:
			out = collectUnknown(v.Message(), name, out)
		}
	}
	return out
}

// withUnknown adds the key "@unknown" with unknown to the compact JSON
// object b.
func withUnknown(b []byte, unknown []UnknownFields) ([]byte, error) {
	u, err := json.Marshal(unknown)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte("}"))
	if !bytes.Equal(b, []byte("{")) {
		b = append(b, ',')
	}
	b = append(b, `"@unknown":`...)
	b = append(b, u...)
	return append(b, '}'), nil
}
