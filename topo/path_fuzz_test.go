package topo_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/topokit/topokit/topo"
)

// Run the fuzzers with e.g.
//
//	go test -run '^$' -fuzz FuzzCleanFilePath ./topo/
//
// A plain `go test` (and so `make test`) runs every seed below once.

// pathSeeds are the seed corpus shared by the three fuzz targets: canonical
// paths, every rule's edge cases, and odd Unicode.
var pathSeeds = []string{
	"", "/", "//", "a", "/a", "a/", "/a/", "a/b", "/a/b/c", "a//b", "//a",
	".", "..", "...", "a/.", "a/..", "./a", "../a", "a/./b", "a/../b", ".a/..b",
	"a\x00b", "\x00", "a\x01", "\x1f", "a\nb", "a\tb", "\x7f", "a\x7fb", "\x80",
	"a\xffb", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "naïve/ключ/鍵", "\u2028",
	"\ufeff/a", "a/\u0085", "a/\ue000", "a/\uffff", "a/\U0001f600", "a/\u00a0", "a b/c d", "cells/zone1/CellInfo", "keyspaces/ks/shards/-80/Shard",
	"elections/name", "d/locks/1234", strings.Repeat("a", topo.MaxPathLength),
	strings.Repeat("a", topo.MaxPathLength+1), strings.Repeat("ab/", 2000),
}

// sq quotes s for a failure message, abbreviating long strings.
func sq(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

func addSeeds(f *testing.F) {
	for _, s := range pathSeeds {
		f.Add(s)
	}
}

// checkRejected fails unless err is an InvalidPath *topo.Error.
func checkRejected(t *testing.T, fn, in string, err error) {
	t.Helper()
	var te *topo.Error
	if !errors.As(err, &te) || te.Code != topo.InvalidPath {
		t.Fatalf("%s(%s) failed with %v (%T), want an InvalidPath *topo.Error", fn, sq(in), err, err)
	}
}

// checkCanonical fails unless p is a canonical path: no leading or trailing
// "/" (unless allowTrailing), no empty, "." or ".." segment, no control
// byte, valid UTF-8, at most MaxPathLength bytes.
func checkCanonical(t *testing.T, fn, in, p string, allowTrailing bool) {
	t.Helper()
	if strings.HasPrefix(p, "/") {
		t.Fatalf("%s(%s) = %s starts with /", fn, sq(in), sq(p))
	}
	if len(p) > topo.MaxPathLength {
		t.Fatalf("%s(%s) = %d bytes, longer than MaxPathLength", fn, sq(in), len(p))
	}
	if !utf8.ValidString(p) {
		t.Fatalf("%s(%s) = %s is not valid UTF-8", fn, sq(in), sq(p))
	}
	for i := 0; i < len(p); i++ {
		if p[i] < 0x20 || p[i] == 0x7f {
			t.Fatalf("%s(%s) = %s contains control byte %#x", fn, sq(in), sq(p), p[i])
		}
	}
	for _, r := range p {
		// Every store keeps these (see docs/semantics.md, "Path rule").
		if r >= 0x10000 || (r >= 0xe000 && r <= 0xf8ff) || r >= 0xfff0 || !unicode.IsPrint(r) {
			t.Fatalf("%s(%s) = %s contains %U, which some store cannot keep", fn, sq(in), sq(p), r)
		}
	}
	if p == "" {
		return
	}
	body := p
	if allowTrailing {
		body = strings.TrimSuffix(p, "/")
	}
	for _, seg := range strings.Split(body, "/") {
		if seg == "" || seg == "." || seg == ".." {
			t.Fatalf("%s(%s) = %s has a bad segment %s", fn, sq(in), sq(p), sq(seg))
		}
	}
}

func FuzzCleanFilePath(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := topo.CleanFilePath(in)
		if err != nil {
			checkRejected(t, "CleanFilePath", in, err)
			if p != "" {
				t.Fatalf("CleanFilePath(%s) returned %s with its error", sq(in), sq(p))
			}
			// Whatever a file path rejects, the other rules reject too,
			// except what they allow on purpose: the root and a trailing /.
			if d, derr := topo.CleanDirPath(in); derr == nil && d != "" && !strings.HasSuffix(in, "/") {
				t.Fatalf("CleanDirPath(%s) = %s accepts a path CleanFilePath rejects", sq(in), sq(d))
			}
			return
		}
		checkCanonical(t, "CleanFilePath", in, p, false)
		if p == "" {
			t.Fatalf("CleanFilePath(%s) accepted an empty path", sq(in))
		}
		if p != strings.TrimPrefix(in, "/") {
			t.Fatalf("CleanFilePath(%s) = %s: only a leading / may be dropped", sq(in), sq(p))
		}
		// Idempotent, and "/p" names the same file (MaxPathLength counts
		// the leading "/" of the input).
		agains := []string{p}
		if len(p) < topo.MaxPathLength {
			agains = append(agains, "/"+p)
		}
		for _, again := range agains {
			q, err := topo.CleanFilePath(again)
			if err != nil || q != p {
				t.Fatalf("CleanFilePath(%s) = %s, %v; want %s", sq(again), sq(q), err, sq(p))
			}
		}
		// A valid file path is a valid directory and prefix, unchanged.
		if d, err := topo.CleanDirPath(in); err != nil || d != p {
			t.Fatalf("CleanDirPath(%s) = %s, %v; want %s", sq(in), sq(d), err, sq(p))
		}
		if x, err := topo.CleanPrefix(in); err != nil || x != p {
			t.Fatalf("CleanPrefix(%s) = %s, %v; want %s", sq(in), sq(x), err, sq(p))
		}
	})
}

func FuzzCleanDirPath(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := topo.CleanDirPath(in)
		if err != nil {
			checkRejected(t, "CleanDirPath", in, err)
			return
		}
		checkCanonical(t, "CleanDirPath", in, p, false)
		if strings.HasSuffix(p, "/") {
			t.Fatalf("CleanDirPath(%s) = %s ends with /", sq(in), sq(p))
		}
		if q, err := topo.CleanDirPath(p); err != nil || q != p {
			t.Fatalf("CleanDirPath(%s) = %s, %v; not idempotent", sq(p), sq(q), err)
		}
		if p != "" {
			if q, err := topo.CleanFilePath(p); err != nil || q != p {
				t.Fatalf("CleanFilePath(%s) = %s, %v; a non-root directory is a valid file path", sq(p), sq(q), err)
			}
			if len(p) < topo.MaxPathLength {
				if q, err := topo.CleanDirPath("/" + p); err != nil || q != p {
					t.Fatalf("CleanDirPath(%s) = %s, %v; want %s", sq("/"+p), sq(q), err, sq(p))
				}
			}
			if q, err := topo.CleanDirPath("/" + p + "/"); len(p) < topo.MaxPathLength && (err != nil || q != p) {
				t.Fatalf("CleanDirPath(%s) = %s, %v; want %s", sq("/"+p+"/"), sq(q), err, sq(p))
			}
		}
	})
}

func FuzzCleanPrefix(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := topo.CleanPrefix(in)
		if err != nil {
			checkRejected(t, "CleanPrefix", in, err)
			return
		}
		checkCanonical(t, "CleanPrefix", in, p, true)
		if q, err := topo.CleanPrefix(p); err != nil || q != p {
			t.Fatalf("CleanPrefix(%s) = %s, %v; not idempotent", sq(p), sq(q), err)
		}
		if q, err := topo.CleanPrefix("/" + p); len(p) < topo.MaxPathLength && (err != nil || q != p) {
			t.Fatalf("CleanPrefix(%s) = %s, %v; want %s", sq("/"+p), sq(q), err, sq(p))
		}
		if p != "" && !strings.HasSuffix(p, "/") {
			if q, err := topo.CleanFilePath(p); err != nil || q != p {
				t.Fatalf("CleanFilePath(%s) = %s, %v; a prefix without a trailing / is a valid file path", sq(p), sq(q), err)
			}
		}
	})
}
