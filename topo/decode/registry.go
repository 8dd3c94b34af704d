package decode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// vitessRecords returns the base names of the records Vitess stores and
// their message types (in Vitess's topodata.proto and vschema.proto).
func vitessRecords() map[string]string {
	return map[string]string{
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
}

// Registry is a set of message types and the rule that picks a record's
// type by its path.
type Registry struct {
	files *protoregistry.Files
	types *dynamicpb.Types
	// records maps a path's base name to a message's full name.
	records map[string]string
}

// Builtin returns a registry of the message types compiled into the binary
// (topokit's CellInfo, protobuf's well-known types, and any other
// generated package the program imports), with Vitess's record names.
func Builtin() *Registry {
	return newRegistry(protoregistry.GlobalFiles)
}

// FromProtoset returns a registry of the message types of fds (a
// FileDescriptorSet with its imports), with Vitess's record names. It
// fails when the files do not resolve (a missing import, a conflict).
func FromProtoset(fds *descriptorpb.FileDescriptorSet) (*Registry, error) {
	files, err := protodesc.NewFiles(fds)
	if err != nil {
		return nil, err
	}
	return newRegistry(files), nil
}

// ReadProtoset reads a binary FileDescriptorSet from file (as "protoc
// --include_imports --descriptor_set_out" writes it) and returns its
// registry (see FromProtoset). It fails when the file cannot be read
// (*fs.PathError), is not a FileDescriptorSet, or does not resolve.
func ReadProtoset(file string) (*Registry, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	fds := &descriptorpb.FileDescriptorSet{}
	if err := proto.Unmarshal(b, fds); err != nil {
		return nil, fmt.Errorf("not a FileDescriptorSet: %w", err)
	}
	return FromProtoset(fds)
}

func newRegistry(files *protoregistry.Files) *Registry {
	return &Registry{files: files, types: dynamicpb.NewTypes(files), records: vitessRecords()}
}

// Register makes the records whose path ends in the segment base decode
// as the message fullName (e.g. "topodata.Tablet"), when the registry has
// it. It replaces a previous rule for base. Not safe for use concurrent
// with lookups.
func (r *Registry) Register(base, fullName string) {
	r.records[base] = strings.TrimPrefix(fullName, ".")
}

// Records returns the base names that have a rule (Vitess's and those
// registered), sorted.
func (r *Registry) Records() []string {
	return slices.Sorted(maps.Keys(r.records))
}

// TypeErrorKind says why no type was found.
type TypeErrorKind int

const (
	// NotFound: no message of that name.
	NotFound TypeErrorKind = iota
	// NotMessage: the name is of something else (an enum, a service).
	NotMessage
	// Ambiguous: several messages have that short name (Candidates).
	Ambiguous
)

// TypeError is the error of a lookup that found no single message type.
type TypeError struct {
	// Name is the name looked up (a full or short name, or a path's base
	// name).
	Name string
	Kind TypeErrorKind
	// Candidates are the full names of the messages of an Ambiguous short
	// name, sorted.
	Candidates []string
}

// Error says what was not found.
func (e *TypeError) Error() string {
	switch e.Kind {
	case NotMessage:
		return fmt.Sprintf("%s is not a message", e.Name)
	case Ambiguous:
		return fmt.Sprintf("several messages are named %s (%s)", e.Name, strings.Join(e.Candidates, ", "))
	}
	return fmt.Sprintf("no message named %s", e.Name)
}

// Type finds a message by full name ("topodata.Tablet"; a leading "." is
// accepted) or by short name ("Tablet": the Vitess record of that name
// when the registry has it, else the one message of that name). It
// returns a *TypeError when there is no single such message.
func (r *Registry) Type(name string) (protoreflect.MessageDescriptor, error) {
	if !strings.Contains(strings.TrimPrefix(name, "."), ".") {
		if md := r.recordType(name); md != nil {
			return md, nil
		}
		return r.byShortName(name)
	}
	d, err := r.files.FindDescriptorByName(protoreflect.FullName(strings.TrimPrefix(name, ".")))
	if err != nil {
		return nil, &TypeError{Name: name, Kind: NotFound}
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, &TypeError{Name: name, Kind: NotMessage}
	}
	return md, nil
}

// TypeFor picks the message type of the record at filePath by its last
// segment: the registered record of that name (Vitess's, see Register),
// else the one message whose short name it is (a file stored at
// .../Tablet holds a Tablet). It returns a *TypeError when there is no
// single such message.
func (r *Registry) TypeFor(filePath string) (protoreflect.MessageDescriptor, error) {
	base := path.Base(filePath)
	if md := r.recordType(base); md != nil {
		return md, nil
	}
	return r.byShortName(base)
}

// recordType returns the message type of the record named base, if the
// registry has it.
func (r *Registry) recordType(base string) protoreflect.MessageDescriptor {
	full, ok := r.records[base]
	if !ok {
		return nil
	}
	d, err := r.files.FindDescriptorByName(protoreflect.FullName(full))
	if err != nil {
		return nil
	}
	md, _ := d.(protoreflect.MessageDescriptor)
	return md
}

// byShortName finds the one message whose short name is base.
func (r *Registry) byShortName(base string) (protoreflect.MessageDescriptor, error) {
	var found []protoreflect.MessageDescriptor
	r.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
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
		return nil, &TypeError{Name: base, Kind: NotFound}
	}
	names := make([]string, len(found))
	for i, md := range found {
		names[i] = string(md.FullName())
	}
	slices.Sort(names)
	return nil, &TypeError{Name: base, Kind: Ambiguous, Candidates: names}
}

// UnknownFieldsError is JSON's error for a value that parses as the type
// but holds fields the type does not have: surely another type.
type UnknownFieldsError struct {
	// Type is the message's full name; Unknown the bytes of unknown
	// fields, of the value's Size.
	Type          string
	Unknown, Size int
}

// Error says how much of the value is not the type's.
func (e *UnknownFieldsError) Error() string {
	return fmt.Sprintf("value is not a %s: %d of its %d bytes are fields that %s does not have (wrong type?)", e.Type, e.Unknown, e.Size, e.Type)
}

// JSON decodes value as md (a type of this registry) and renders it with
// protojson, re-encoded by encoding/json so that the output is stable:
// indented by two spaces when multiline, compact otherwise. It fails when
// value is not an md, or holds fields md does not have
// (*UnknownFieldsError).
func (r *Registry) JSON(md protoreflect.MessageDescriptor, value []byte, multiline bool) ([]byte, error) {
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{Resolver: r.types}).Unmarshal(value, msg); err != nil {
		return nil, fmt.Errorf("value is not a %s: %w", md.FullName(), err)
	}
	if u := msg.GetUnknown(); len(u) > 0 {
		return nil, &UnknownFieldsError{Type: string(md.FullName()), Unknown: len(u), Size: len(value)}
	}
	b, err := protojson.MarshalOptions{Resolver: r.types}.Marshal(msg)
	if err != nil {
		return nil, err
	}
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

// Decode renders the record at filePath as JSON (see TypeFor and JSON).
func (r *Registry) Decode(filePath string, value []byte, multiline bool) ([]byte, error) {
	md, err := r.TypeFor(filePath)
	if err != nil {
		return nil, err
	}
	return r.JSON(md, value, multiline)
}
