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

// Registry is a set of message types and the rules that pick a record's
// type by its path.
type Registry struct {
	files *protoregistry.Files
	types *dynamicpb.Types
	// records maps a path's base name to a message's full name
	// (Register).
	records map[string]string
	// paths are the rules of RegisterPath, the latest last.
	paths []layoutRule
	// layout is Vitess's layout (vitessLayout).
	layout []layoutRule
}

// Builtin returns a registry of the message types compiled into the binary
// (every record of Vitess's topology layout, from proto/topodatapb and
// proto/vschemapb; protobuf's well-known types; and any other generated
// package the program imports), with Vitess's layout (Layout).
func Builtin() *Registry {
	return newRegistry(protoregistry.GlobalFiles)
}

// FromProtoset returns a registry of the message types of fds (a
// FileDescriptorSet with its imports), with Vitess's layout (Layout): a
// record of the layout decodes as the protoset's type of Vitess's name
// (e.g. topodata.Tablet) when it has one, else as the compiled-in type of
// the same wire format, so a protoset adds types and never loses the
// layout's. It fails when the files do not resolve (a missing import, a
// conflict). A nil fds is an empty set.
func FromProtoset(fds *descriptorpb.FileDescriptorSet) (*Registry, error) {
	if fds == nil {
		fds = &descriptorpb.FileDescriptorSet{}
	}
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
	return &Registry{files: files, types: dynamicpb.NewTypes(files), records: map[string]string{}, layout: vitessLayout()}
}

// Register makes the records whose path ends in the segment base decode
// as the message fullName (e.g. "topodata.Tablet"), when the registry has
// it. It replaces a previous rule for base and wins over RegisterPath's
// rules and Vitess's layout. Not safe for use concurrent with lookups.
func (r *Registry) Register(base, fullName string) {
	r.records[base] = strings.TrimPrefix(fullName, ".")
}

// RegisterPath makes the records whose path ends in the segments of
// pattern decode as the message fullName, when the registry has it.
// pattern is slash-separated names or "*" (any one segment), e.g.
// "keyspaces/*/Settings" (an empty pattern matches nothing). It wins over
// earlier RegisterPath rules and Vitess's layout, not over Register's.
// Not safe for use concurrent with lookups.
func (r *Registry) RegisterPath(pattern, fullName string) {
	r.paths = append(r.paths, layoutRule{
		PathRule: PathRule{Pattern: pattern, Type: strings.TrimPrefix(fullName, ".")},
		segs:     segments(pattern),
	})
}

// Records returns the names of the message records that have a rule (the
// Name of Vitess's layout's, see Layout, and the base names registered),
// sorted: the short names Type knows as records.
func (r *Registry) Records() []string {
	names := maps.Clone(r.records)
	for _, l := range r.layout {
		if l.Content == MessageContent {
			names[l.Name] = l.Type
		}
	}
	return slices.Sorted(maps.Keys(names))
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
	// NotProtobuf: the path is a file that holds text or JSON (a lock's,
	// an election's, metadata; see Identify); Decode renders it.
	NotProtobuf
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
	case NotProtobuf:
		return fmt.Sprintf("%s holds text (a lock's, an election's or metadata), not a message", e.Name)
	}
	return fmt.Sprintf("no message named %s", e.Name)
}

// Type finds a message by full name ("topodata.Tablet"; a leading "." is
// accepted) or by short name ("Tablet": the record of that name, by
// Register or Vitess's layout, e.g. "VSchema" is a vschema Keyspace; else
// the one message of that name). A full name of Vitess's layout
// ("topodata.Tablet", "vschema.Keyspace") that no protoset added is the
// built-in type of that record, as the layout decodes it. It returns a
// *TypeError when there is no single such message.
func (r *Registry) Type(name string) (protoreflect.MessageDescriptor, error) {
	if !strings.Contains(strings.TrimPrefix(name, "."), ".") {
		if md := r.find(r.records[name]); md != nil {
			return md, nil
		}
		for _, l := range r.layout {
			if l.Name == name && l.Content == MessageContent {
				return r.resolve(l), nil
			}
		}
		return r.byShortName(name)
	}
	d, err := r.files.FindDescriptorByName(protoreflect.FullName(strings.TrimPrefix(name, ".")))
	if err != nil {
		for _, l := range r.layout {
			if l.Type == strings.TrimPrefix(name, ".") && l.builtin != nil {
				return l.builtin, nil
			}
		}
		return nil, &TypeError{Name: name, Kind: NotFound}
	}
	md, ok := d.(protoreflect.MessageDescriptor)
	if !ok {
		return nil, &TypeError{Name: name, Kind: NotMessage}
	}
	return md, nil
}

// TypeFor picks the message type of the record at filePath (relative to
// a cell's root; a rule of the layout also matches with the root in
// front): the type of a rule (Register's for the last segment, then
// RegisterPath's, then Vitess's layout, see Layout), else the one message
// whose short name is the last segment (a file stored at .../Tablet holds
// a Tablet). It returns a *TypeError when there is no single such
// message: NotProtobuf for a file that holds text (a lock's, an
// election's, metadata; see Identify).
func (r *Registry) TypeFor(filePath string) (protoreflect.MessageDescriptor, error) {
	c, md := r.Identify(filePath)
	base := path.Base(filePath)
	switch c {
	case MessageContent:
		return md, nil
	case UnknownContent:
		return r.byShortName(base)
	}
	return nil, &TypeError{Name: base, Kind: NotProtobuf}
}

// Identify says what the file at filePath holds by the registry's rules
// (as TypeFor, without the guess by short name), trying in order:
// Register's rule for the last segment, RegisterPath's rules (latest
// first), a lock's or an election's file (LockContent: a segment "locks"
// above the file or a last segment "Lock"; ElectionContent: a first
// segment "elections"), and Vitess's layout (Layout). It returns
// MessageContent and the type, another Content and nil, or UnknownContent
// and nil when no rule matches.
func (r *Registry) Identify(filePath string) (Content, protoreflect.MessageDescriptor) {
	segs := segments(filePath)
	if len(segs) == 0 {
		return UnknownContent, nil
	}
	if md := r.find(r.records[segs[len(segs)-1]]); md != nil {
		return MessageContent, md
	}
	for _, l := range slices.Backward(r.paths) {
		if matches(l.segs, segs) {
			if md := r.find(l.Type); md != nil {
				return MessageContent, md
			}
		}
	}
	if c := lockOrElection(segs); c != UnknownContent {
		return c, nil
	}
	for _, l := range r.layout {
		if matches(l.segs, segs) {
			if l.Content != MessageContent {
				return l.Content, nil
			}
			return MessageContent, r.resolve(l)
		}
	}
	return UnknownContent, nil
}

// resolve is the registry's type of Vitess's name for a layout rule, else
// the compiled-in type of the same wire format.
func (r *Registry) resolve(l layoutRule) protoreflect.MessageDescriptor {
	if md := r.find(l.Type); md != nil {
		return md
	}
	return l.builtin
}

// find returns the message full, nil when full is empty or not a message
// of the registry.
func (r *Registry) find(full string) protoreflect.MessageDescriptor {
	if full == "" {
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
	return r.render(md, value, multiline, false)
}

// render is JSON; with lenient, fields md does not have are shown under
// "@unknown" (see Decode) rather than refused.
func (r *Registry) render(md protoreflect.MessageDescriptor, value []byte, multiline, lenient bool) ([]byte, error) {
	msg := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{Resolver: r.types}).Unmarshal(value, msg); err != nil {
		return nil, fmt.Errorf("value is not a %s: %w", md.FullName(), err)
	}
	var unknown []UnknownFields
	if lenient {
		unknown = collectUnknown(msg, "", nil)
	} else if u := msg.GetUnknown(); len(u) > 0 {
		return nil, &UnknownFieldsError{Type: string(md.FullName()), Unknown: len(u), Size: len(value)}
	}
	b, err := protojson.MarshalOptions{Resolver: r.types}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	if len(unknown) > 0 {
		if b, err = withUnknown(out.Bytes(), unknown); err != nil {
			return nil, err
		}
		out.Reset()
		out.Write(b)
	}
	return layoutJSON(out.Bytes(), multiline)
}

// layoutJSON indents the compact JSON b by two spaces when multiline.
func layoutJSON(b []byte, multiline bool) ([]byte, error) {
	if !multiline {
		return b, nil
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Decode renders the record at filePath as JSON, indented by two spaces
// when multiline, compact otherwise. A message record (see TypeFor) is
// rendered as JSON does; when a rule picked its type (Register,
// RegisterPath, Vitess's layout), fields the type does not have (a newer
// writer's) do not fail it: they are shown, schema-less (RawField), under
// the key "@unknown" as a list of {"at": where, "fields": [...]}, where is
// the JSON path of the message that holds them ("" for the record
// itself). A file that holds text (a lock's, an election's, metadata; see
// Identify) is rendered by Text. It fails with TypeFor's *TypeError, or
// when value is not the type.
func (r *Registry) Decode(filePath string, value []byte, multiline bool) ([]byte, error) {
	switch c, md := r.Identify(filePath); c {
	case MessageContent:
		return r.render(md, value, multiline, true)
	case LockContent, ElectionContent, TextContent:
		return Text(value, multiline)
	}
	md, err := r.TypeFor(filePath)
	if err != nil {
		return nil, err
	}
	return r.JSON(md, value, multiline)
}
