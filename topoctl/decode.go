package topoctl

// get --decode's CLI side: the flags' words for the decode package's
// errors. Decoding itself is in topo/decode.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"
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
// the record at filePath (nil, and no error, for a file that holds text:
// a lock's, an election's, metadata), with its errors as usage errors
// naming the flag.
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
	if name == "" && te.Kind == decode.NotProtobuf {
		// A lock's, an election's or a metadata file: decodeByPath
		// shows the text it holds.
		return nil, nil
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

// recordDecoder decodes the values of many records, each by its path, for
// get -R --decode and watch --decode: raw (the wire dump) or json (the
// type chosen by the record's path from the built-in types, or a
// --protoset's).
type recordDecoder struct {
	// raw selects the wire dump; otherwise sch decodes to JSON.
	raw bool
	sch *schema
}

// newRecordDecoder returns the decoder of --decode mode ("raw" or
// "json"; "" and "none" decode nothing: nil) with --protoset file (for
// json; "" reads $TOPOCTL_PROTOSET through getenv, and without either
// the built-in types decode). Bad flags are usage errors.
func newRecordDecoder(mode, protoset string, getenv func(string) string) (*recordDecoder, error) {
	switch mode {
	case "", "none":
		if protoset != "" {
			return nil, usagef("--protoset needs --decode json")
		}
		return nil, nil
	case "raw":
		if protoset != "" {
			return nil, usagef("--protoset needs --decode json")
		}
		return &recordDecoder{raw: true}, nil
	case "json":
		if protoset == "" {
			protoset = getenv(envProtoset)
		}
		sch, err := loadSchema(protoset)
		if err != nil {
			return nil, err
		}
		return &recordDecoder{sch: sch}, nil
	}
	return nil, usagef("--decode %q: want raw or json", mode)
}

// decode decodes the value of the record at p (canonical): the value for
// JSON output (a json.RawMessage, or the raw fields) and its readable text
// (indented JSON when multiline, or the wire dump), ending with a newline.
// It fails when the value is not protobuf (raw), or when no type is known
// for p or the value is not one (json; see decodeByPath).
func (d *recordDecoder) decode(p string, value []byte, multiline bool) (any, string, error) {
	if d.raw {
		fs, err := parseRaw(value, 0)
		if err != nil {
			return nil, "", fmt.Errorf("value is not protobuf wire format: %w", err)
		}
		return fs, formatRaw(fs), nil
	}
	b, err := decodeByPath(d.sch, p, value, multiline)
	if err != nil {
		return nil, "", err
	}
	return json.RawMessage(b), string(b) + "\n", nil
}

// decodeByPath is the registry's Decode of the record at p (canonical):
// a record of Vitess's layout as its type (fields the type lacks shown
// under "@unknown"), a lock's, an election's or a metadata file as JSON
// text, any other file as the one message named like its base name. Its
// errors say that no type is known (--protoset adds types), or that the
// value is not the type.
func decodeByPath(r *schema, p string, value []byte, multiline bool) ([]byte, error) {
	b, err := r.Decode(p, value, multiline)
	var te *decode.TypeError
	var ue *decode.UnknownFieldsError
	switch {
	case errors.As(err, &te):
		return nil, fmt.Errorf("no message type known for it (--protoset adds types): %w", err)
	case errors.As(err, &ue):
		return nil, fmt.Errorf("value is not a %s: %d of its %d bytes are fields that %s does not have", ue.Type, ue.Unknown, ue.Size, ue.Type)
	}
	return b, err
}

// decodeArgs is exactArgs(n) for a command with --decode: one argument
// too many after --decode is most likely a value --decode does not take
// (a bare --decode takes none, see joinDecodeValue), and is refused
// naming it.
func decodeArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n+1 && cmd.Flags().Changed("decode") {
			return usagef("--decode %q: want raw or json, or a bare --decode (json) (%s takes %d argument(s), got %d)", args[0], cmd.CommandPath(), n, len(args))
		}
		return exactArgs(n)(cmd, args)
	}
}

// isDecodeMode reports whether s is a value --decode takes; a bare
// --decode is decodeDefault.
func isDecodeMode(s string) bool {
	switch s {
	case "raw", "json", "none":
		return true
	}
	return false
}

// decodeDefault is the mode of a bare --decode: the readable decoded form.
const decodeDefault = "json"

// joinDecodeValue returns args with each "--decode MODE" (MODE one that
// isDecodeMode accepts) written "--decode=MODE". --decode takes its value
// optionally (a bare --decode is decodeDefault, so "get -R --decode /"
// reads "/"), and pflag gives an optional value only after "=": joining
// keeps the spelling "--decode json PATH" meaning what it always meant.
// Arguments after "--" are left as they are.
func joinDecodeValue(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if a == "--decode" && i+1 < len(args) && isDecodeMode(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// decodedJSON are the members a record's JSON object gets from
// --decode: "decoded", or "decode_error" when the value does not decode.
type decodedJSON struct {
	Decoded     any    `json:"decoded,omitempty"`
	DecodeError string `json:"decode_error,omitempty"`
}

// decodedMembers are the decodedJSON of decode's results.
func decodedMembers(decoded any, err error) decodedJSON {
	if err != nil {
		return decodedJSON{DecodeError: err.Error()}
	}
	return decodedJSON{Decoded: decoded}
}
