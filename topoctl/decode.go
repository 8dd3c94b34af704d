package topoctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// rawField is one field of a protobuf wire dump.
type rawField struct {
	Field  protowire.Number `json:"field"`
	Wire   string           `json:"wire"`
	Uint   *uint64          `json:"uint,omitempty"`
	String *string          `json:"string,omitempty"`
	Bytes  []byte           `json:"bytes,omitempty"`
	Fields []rawField       `json:"fields,omitempty"`
}

// parseRaw decodes b as protobuf wire format without a schema. A
// length-delimited field is shown as a string when it is printable UTF-8,
// as a nested message when it parses as one, and as bytes otherwise.
func parseRaw(b []byte, depth int) ([]rawField, error) {
	if depth > 64 {
		return nil, errors.New("message nested too deeply")
	}
	var out []rawField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("bad tag at byte offset: %w", protowire.ParseError(n))
		}
		b = b[n:]
		f := rawField{Field: num}
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			f.Wire, f.Uint, b = "varint", &v, b[n:]
		case protowire.Fixed32Type:
			v, n := protowire.ConsumeFixed32(b)
			if n < 0 {
				return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			u := uint64(v)
			f.Wire, f.Uint, b = "fixed32", &u, b[n:]
		case protowire.Fixed64Type:
			v, n := protowire.ConsumeFixed64(b)
			if n < 0 {
				return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			f.Wire, f.Uint, b = "fixed64", &v, b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			f.Wire = "bytes"
			if printable(v) {
				s := string(v)
				f.String = &s
			} else if sub, err := parseRaw(v, depth+1); err == nil && len(sub) > 0 {
				f.Wire, f.Fields = "message", sub
			} else {
				f.Bytes = slices.Clone(v)
			}
		case protowire.StartGroupType:
			v, n := protowire.ConsumeGroup(num, b)
			if n < 0 {
				return nil, fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			sub, err := parseRaw(v, depth+1)
			if err != nil {
				return nil, err
			}
			f.Wire, f.Fields = "group", sub
		default:
			return nil, fmt.Errorf("field %d: unexpected wire type %d", num, typ)
		}
		out = append(out, f)
	}
	return out, nil
}

// printable reports whether b is non-empty UTF-8 text without control
// characters (an empty value is shown as "").
func printable(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// formatRaw renders a wire dump as indented text, one field per line:
//
//	1: "zone1"
//	3 {
//	  1: 100
//	}
func formatRaw(fs []rawField) string {
	var sb strings.Builder
	writeRaw(&sb, fs, "")
	return sb.String()
}

func writeRaw(sb *strings.Builder, fs []rawField, indent string) {
	for _, f := range fs {
		switch {
		case f.Fields != nil:
			fmt.Fprintf(sb, "%s%d {\n", indent, f.Field)
			writeRaw(sb, f.Fields, indent+"  ")
			fmt.Fprintf(sb, "%s}\n", indent)
		case f.Uint != nil && f.Wire == "varint":
			fmt.Fprintf(sb, "%s%d: %d\n", indent, f.Field, *f.Uint)
		case f.Uint != nil && f.Wire == "fixed32":
			fmt.Fprintf(sb, "%s%d: 0x%08x\n", indent, f.Field, *f.Uint)
		case f.Uint != nil:
			fmt.Fprintf(sb, "%s%d: 0x%016x\n", indent, f.Field, *f.Uint)
		case f.String != nil:
			fmt.Fprintf(sb, "%s%d: %s\n", indent, f.Field, strconv.Quote(*f.String))
		default:
			fmt.Fprintf(sb, "%s%d: %s\n", indent, f.Field, quoteBytes(f.Bytes))
		}
	}
}

// quoteBytes quotes binary data with \x escapes.
func quoteBytes(b []byte) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, c := range b {
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "\\x%02x", c)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// schema is a set of message types loaded from a FileDescriptorSet.
type schema struct {
	files *protoregistry.Files
	types *dynamicpb.Types
}

// loadSchema reads a binary FileDescriptorSet (as written by
// `protoc --descriptor_set_out --include_imports`). An empty file name
// selects the message types compiled into topoctl (topokit's CellInfo and
// protobuf's well-known types).
func loadSchema(file string) (*schema, error) {
	if file == "" {
		return &schema{files: protoregistry.GlobalFiles, types: dynamicpb.NewTypes(protoregistry.GlobalFiles)}, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError{fmt.Errorf("--protoset: %w", err)}
	}
	fds := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, fds); err != nil {
		return nil, usageError{fmt.Errorf("--protoset %s: not a FileDescriptorSet: %w", file, err)}
	}
	files, err := protodesc.NewFiles(fds)
	if err != nil {
		return nil, usageError{fmt.Errorf("--protoset %s: %w", file, err)}
	}
	return &schema{files: files, types: dynamicpb.NewTypes(files)}, nil
}

// messageType finds a message by full name ("topodata.Tablet", a leading
// "." is accepted). With an empty name it looks for the one message whose
// short name equals the file's base name (a file stored at .../Tablet holds
// a Tablet), and fails listing the candidates when there are none or several.
func (s *schema) messageType(name, filePath string) (protoreflect.MessageDescriptor, error) {
	if name != "" && !strings.Contains(strings.TrimPrefix(name, "."), ".") {
		// A short name: the Vitess record of that name, else the one
		// message of that name.
		if md := s.vitessType(name); md != nil {
			return md, nil
		}
		return s.byShortName(name, "--type "+name)
	}
	if name != "" {
		d, err := s.files.FindDescriptorByName(protoreflect.FullName(strings.TrimPrefix(name, ".")))
		if err != nil {
			return nil, usagef("--type %s: no such message in the protoset", name)
		}
		md, ok := d.(protoreflect.MessageDescriptor)
		if !ok {
			return nil, usagef("--type %s: not a message", name)
		}
		return md, nil
	}
	base := path.Base(filePath)
	if md := s.vitessType(base); md != nil {
		return md, nil
	}
	return s.byShortName(base, "--decode json")
}

// vitessRecords maps the base names of the records Vitess stores to their
// message types (in Vitess's topodata.proto and vschema.proto).
var vitessRecords = map[string]string{
	"Keyspace":              "topodata.Keyspace",
	"Shard":                 "topodata.Shard",
	"Tablet":                "topodata.Tablet",
	"ShardReplication":      "topodata.ShardReplication",
	"SrvKeyspace":           "topodata.SrvKeyspace",
	"CellInfo":              "topodata.CellInfo",
	"CellsAlias":            "topodata.CellsAlias",
	"ExternalVitessCluster": "topodata.ExternalVitessCluster",
	"VSchema":               "vschema.Keyspace",
	"SrvVSchema":            "vschema.SrvVSchema",
	"RoutingRules":          "vschema.RoutingRules",
	"KeyspaceRoutingRules":  "vschema.KeyspaceRoutingRules",
	"ShardRoutingRules":     "vschema.ShardRoutingRules",
	"MirrorRules":           "vschema.MirrorRules",
}

// vitessType returns the message type of the Vitess record named base, if
// the schema has it.
func (s *schema) vitessType(base string) protoreflect.MessageDescriptor {
	full, ok := vitessRecords[base]
	if !ok {
		return nil
	}
	d, err := s.files.FindDescriptorByName(protoreflect.FullName(full))
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MessageDescriptor)
	return md
}

// byShortName finds the one message whose short name is base; what names
// the flag or mode in the error when there are none or several.
func (s *schema) byShortName(base, what string) (protoreflect.MessageDescriptor, error) {
	var found []protoreflect.MessageDescriptor
	s.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		ms := fd.Messages()
		for i := range ms.Len() {
			if string(ms.Get(i).Name()) == base {
				found = append(found, ms.Get(i))
			}
		}
		return true
	})
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, usagef("%s: no message named %s in the protoset; give --type", what, base)
	}
	names := make([]string, len(found))
	for i, md := range found {
		names[i] = string(md.FullName())
	}
	slices.Sort(names)
	return nil, usagef("%s: several messages are named %s (%s); give --type", what, base, strings.Join(names, ", "))
}

// decodeJSON decodes value as md and renders it with protojson.
func (s *schema) decodeJSON(md protoreflect.MessageDescriptor, value []byte, multiline bool) ([]byte, error) {
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{Resolver: s.types}).Unmarshal(value, msg); err != nil {
		return nil, fmt.Errorf("value is not a %s: %w", md.FullName(), err)
	}
	if u := msg.GetUnknown(); len(u) > 0 {
		return nil, fmt.Errorf("value is not a %s: %d of its %d bytes are fields that %s does not have (wrong --type?)", md.FullName(), len(u), len(value), md.FullName())
	}
	b, err := protojson.MarshalOptions{Resolver: s.types}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	// protojson varies its spacing on purpose; re-encode it with
	// encoding/json so that the output is stable.
	var out bytes.Buffer
	if multiline {
		err = json.Indent(&out, b, "", "  ")
	} else {
		err = json.Compact(&out, b)
	}
	if err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
