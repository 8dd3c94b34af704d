package topoctl

// get --decode's CLI side: the flags' words for the decode package's
// errors. Decoding itself is in topo/decode.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/topokit/topokit/topo/decode"
)

// schema is the set of message types get --decode json decodes with.
type schema = decode.Registry

// rawField is one field of a protobuf wire dump.
type rawField = decode.RawField

// parseRaw is decode.Raw (depth is the nesting already followed: 0).
func parseRaw(b []byte, depth int) ([]rawField, error) {
	if depth != 0 {
		return nil, errors.New("parseRaw starts at depth 0")
	}
	return decode.Raw(b)
}

// formatRaw is decode.FormatRaw.
func formatRaw(fs []rawField) string { return decode.FormatRaw(fs) }

// printable reports whether b is UTF-8 text without control characters
// (an empty value is shown as "").
func printable(b []byte) bool { return decode.Printable(b) }

// loadSchema reads --protoset's FileDescriptorSet (as written by `protoc
// --descriptor_set_out --include_imports`) into a decode.Registry; an
// empty file name selects the message types compiled into topoctl. Its
// errors are usage errors naming --protoset.
func loadSchema(file string) (*schema, error) {
	if file == "" {
		return decode.Builtin(), nil
	}
	r, err := decode.ReadProtoset(file)
	var pe *fs.PathError
	switch {
	case err == nil:
		return r, nil
	case errors.As(err, &pe):
		// The file could not be read: its name is in the error.
		return nil, usageError{fmt.Errorf("--protoset: %w", err)}
	}
	return nil, usageError{fmt.Errorf("--protoset %s: %w", file, err)}
}

// messageType is the registry's type for --type name or, without it, for
// the record at filePath, with its errors as usage errors naming the flag.
func messageType(r *schema, name, filePath string) (protoreflect.MessageDescriptor, error) {
	var md protoreflect.MessageDescriptor
	var err error
	what := "--decode json"
	if name != "" {
		what = "--type " + name
		md, err = r.Type(name)
	} else {
		md, err = r.TypeFor(filePath)
	}
	var te *decode.TypeError
	if !errors.As(err, &te) {
		return md, err
	}
	full := name != "" && strings.Contains(strings.TrimPrefix(name, "."), ".")
	switch {
	case full && te.Kind == decode.NotMessage:
		return nil, usagef("--type %s: not a message", name)
	case full:
		return nil, usagef("--type %s: no such message in the protoset", name)
	case te.Kind == decode.Ambiguous:
		return nil, usagef("%s: several messages are named %s (%s); give --type", what, te.Name, strings.Join(te.Candidates, ", "))
	}
	return nil, usagef("%s: no message named %s in the protoset; give --type", what, te.Name)
}

// decodeJSON is the registry's JSON with its error for a value of another
// type in --type's words.
func decodeJSON(r *schema, md protoreflect.MessageDescriptor, value []byte, multiline bool) ([]byte, error) {
	b, err := r.JSON(md, value, multiline)
	var ue *decode.UnknownFieldsError
	if errors.As(err, &ue) {
		return nil, fmt.Errorf("value is not a %s: %d of its %d bytes are fields that %s does not have (wrong --type?)", ue.Type, ue.Unknown, ue.Size, ue.Type)
	}
	return b, err
}
