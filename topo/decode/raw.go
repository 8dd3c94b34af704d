package decode

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// RawField is one field of a protobuf wire dump (Raw).
type RawField struct {
	// Field is the field number; Wire its wire type: "varint",
	// "fixed32", "fixed64", "bytes", "message" (a length-delimited field
	// that parses as a message) or "group".
	Field protowire.Number `json:"field"`
	Wire  string           `json:"wire"`
	// Uint is a number's value; String a length-delimited field that is
	// printable UTF-8; Bytes one that is neither text nor a message;
	// Fields a message's or a group's fields.
	Uint   *uint64    `json:"uint,omitempty"`
	String *string    `json:"string,omitempty"`
	Bytes  []byte     `json:"bytes,omitempty"`
	Fields []RawField `json:"fields,omitempty"`
}

// maxDepth bounds the nesting Raw follows.
const maxDepth = 64

// Raw decodes b as protobuf wire format without a schema. A
// length-delimited field is shown as a string when it is printable UTF-8,
// as a nested message when it parses as one, and as bytes otherwise. It
// fails when b is not wire format (naming the field and the cause), or
// nests messages more than 64 deep. An empty b has no fields.
func Raw(b []byte) ([]RawField, error) { return parseRaw(b, 0) }

func parseRaw(b []byte, depth int) ([]RawField, error) {
	if depth > maxDepth {
		return nil, errors.New("message nested too deeply")
	}
	var out []RawField
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("bad tag at byte offset: %w", protowire.ParseError(n))
		}
		b = b[n:]
		f := RawField{Field: num}
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
			if Printable(v) {
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

// Printable reports whether b is UTF-8 text without control characters
// (an empty b is).
func Printable(b []byte) bool {
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

// FormatRaw renders a wire dump as indented text, one field per line:
//
//	1: "zone1"
//	3 {
//	  1: 100
//	}
func FormatRaw(fs []RawField) string {
	var sb strings.Builder
	writeRaw(&sb, fs, "")
	return sb.String()
}

func writeRaw(sb *strings.Builder, fs []RawField, indent string) {
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
