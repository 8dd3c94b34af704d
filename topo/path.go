package topo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxValueSize is the largest file value, in bytes, that any backend accepts
// (512 KiB, Consul's KV limit, so that a tree can be copied between any two
// backends). Larger writes fail with InvalidArgument and write nothing.
const MaxValueSize = 512 * 1024

// MaxPathLength is the longest canonical path (without its leading "/"),
// in bytes, that CleanFilePath, CleanDirPath and CleanPrefix accept.
const MaxPathLength = 4096

// CleanFilePath validates a file path and returns it in canonical form:
// relative to the cell root, without a leading "/". "a/b" and "/a/b" both
// give "a/b". It returns an InvalidPath *Error when the path is empty or
// "/", has a trailing "/", contains an empty ("//"), "." or ".." segment,
// contains NUL or another control byte (below 0x20, or 0x7f), is not valid
// UTF-8, holds a code point that some supported store cannot store and read
// back (any above U+FFFF, U+E000–U+F8FF, U+FFF0–U+FFFF, and every one that
// Go's unicode.IsPrint calls not printable, such as U+0080–U+00A0, U+00AD,
// U+2028 or U+FEFF; see docs/semantics.md), or is longer than
// MaxPathLength. Every backend calls it (or
// CleanDirPath) before touching the store, so a bad path writes nothing.
func CleanFilePath(p string) (string, error) {
	if strings.HasSuffix(p, "/") {
		return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("a file path must not end with '/'")}
	}
	c, err := cleanPath(p)
	if err != nil {
		return "", err
	}
	if c == "" {
		return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("a file path must not be empty")}
	}
	return c, nil
}

// CleanDirPath validates a directory path and returns it in canonical form:
// without leading or trailing "/", and "" for the cell root ("", "/").
// It applies the rules of CleanFilePath, except that the root is allowed and
// one trailing "/" is accepted.
func CleanDirPath(p string) (string, error) {
	q := strings.TrimSuffix(p, "/")
	switch q {
	case "":
		return "", nil
	case "/":
		return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("empty path segment")}
	}
	return cleanPath(q)
}

// CleanPrefix validates a List or WatchRecursive prefix. A prefix is a plain
// string prefix over canonical file paths, so it may end in "/" or in the
// middle of a name; "" and "/" mean every file. It must otherwise follow the
// rules of CleanFilePath. The result has no leading "/".
func CleanPrefix(p string) (string, error) {
	if p == "" || p == "/" {
		return "", nil
	}
	trailing := strings.HasSuffix(p, "/")
	q := strings.TrimSuffix(p, "/")
	if q == "/" { // "//": an empty segment, not the root
		return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("empty path segment")}
	}
	c, err := cleanPath(q)
	if err != nil {
		return "", err
	}
	if trailing {
		c += "/"
	}
	return c, nil
}

// storableRune reports whether every supported store can store a path
// holding the non-ASCII code point r and read it back byte for byte (ASCII
// is checked by cleanPath: everything but control bytes). The refusals,
// and the store behind each (docs/semantics.md has the table):
//
//   - ZooKeeper (PathUtils.validatePath, on Java's UTF-16 chars) refuses
//     U+007F–U+009F, U+D800–U+F8FF (so also every code point above
//     U+FFFF, which Java holds as a surrogate pair) and U+FFF0–U+FFFF;
//   - Consul's HTTP API answers 400 to a URL path holding a code point
//     that is not printable (Go's unicode.IsPrint: letters, marks,
//     numbers, punctuation, symbols and the ASCII space), although it
//     stores such keys when written in a transaction, so that they could
//     be written and listed but never read.
//
// Checked against the real servers by the path fuzz test in topo/pathfuzz.
func storableRune(r rune) bool {
	switch {
	case r >= 0x10000: // ZooKeeper: a surrogate pair
		return false
	case r >= 0xD800 && r <= 0xF8FF: // ZooKeeper
		return false
	case r >= 0xFFF0: // ZooKeeper
		return false
	}
	return unicode.IsPrint(r) // Consul; also refuses U+0080–U+009F
}

func cleanPath(p string) (string, error) {
	c := strings.TrimPrefix(p, "/")
	if len(c) > MaxPathLength {
		return "", &Error{Code: InvalidPath, Path: p[:64] + "...", Err: errors.New("path longer than MaxPathLength")}
	}
	// One pass over the bytes for control bytes (and whether UTF-8 needs
	// checking), one over the segments: this runs on every call.
	ascii := true
	for i := 0; i < len(c); i++ {
		b := c[i]
		if b < 0x20 || b == 0x7f {
			return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("path contains a control byte")}
		}
		if b >= 0x80 {
			ascii = false
		}
	}
	if !ascii {
		if !utf8.ValidString(c) {
			return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("path is not valid UTF-8")}
		}
		for _, r := range c {
			if !storableRune(r) {
				return "", &Error{Code: InvalidPath, Path: p, Err: fmt.Errorf("path contains %U, which a supported store cannot store and read back", r)}
			}
		}
	}
	if c == "" {
		return "", nil
	}
	start := 0
	for i := 0; i <= len(c); i++ {
		if i < len(c) && c[i] != '/' {
			continue
		}
		switch c[start:i] {
		case "":
			return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("empty path segment")}
		case ".", "..":
			return "", &Error{Code: InvalidPath, Path: p, Err: errors.New("'.' and '..' segments are not allowed")}
		}
		start = i + 1
	}
	return c, nil
}

// checkContext returns nil while ctx is live, and otherwise the *Error that
// fromContext gives.
func checkContext(ctx context.Context, path string) error {
	if ctx.Err() == nil {
		return nil
	}
	return fromContext(ctx, path)
}

// fromContext maps a finished context onto a typed error for path: Timeout
// when its deadline passed, Interrupted when it was cancelled. It returns nil
// while ctx is live.
func fromContext(ctx context.Context, path string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	return &Error{Code: contextCode(err), Path: path, Err: err}
}

// contextCode is the code of a finished context's error: Timeout for a
// passed deadline, Interrupted for a cancellation.
func contextCode(err error) ErrorCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return Timeout
	}
	return Interrupted
}
