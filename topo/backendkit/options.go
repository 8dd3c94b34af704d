package backendkit

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// OrDefault returns v when it is positive, and def otherwise: how a
// backend's constructor fills the fields of its Options left zero (or set
// negative) with their defaults. etcd2topo, zk2topo and consultopo use it.
func OrDefault[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// SplitAddresses returns the non-empty items, trimmed of spaces, of the
// comma-separated server addresses a Factory's Create is given (nil when
// there is none). etcd2topo and zk2topo use it.
func SplitAddresses(serverAddress string) []string {
	var out []string
	for a := range strings.SplitSeq(serverAddress, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// MaxSecretFileSize is the largest credentials file (in bytes)
// ReadSecretFile reads: an ACL token, a "scheme:auth" or a password is
// far smaller.
const MaxSecretFileSize = 64 * 1024

// ReadSecretFile returns the contents of the file at path, which holds a
// credential (zk2topo's Options.AuthFile, consultopo's TokenFile). It
// reads at most MaxSecretFileSize+1 bytes, so that a path naming an
// endless file (/dev/zero, a FIFO fed forever) or a large one by mistake
// fails at once instead of taking every byte of memory: a larger file is
// an error saying so. The errors are plain (os.Open's, or the size's);
// callers wrap them with their code. Safe for concurrent use.
func ReadSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSecretFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSecretFileSize {
		return nil, fmt.Errorf("%s: larger than %d bytes: not a credentials file", path, MaxSecretFileSize)
	}
	return b, nil
}
