package topo

import (
	"errors"
	"strconv"
)

// Version is a file's version as a backend reports it. A nil Version passed
// to Update or Delete means "any version". Versions are compared only by the
// backend that issued them.
type Version interface {
	String() string
}

// NumericVersion is the Version every bundled backend returns: etcd's
// ModRevision, ZooKeeper's Stat.Version, Consul's ModifyIndex, and
// memorytopo's per-store counter. Its String form is the decimal number, and
// ParseVersion reads it back.
type NumericVersion int64

// String returns the decimal form of v.
func (v NumericVersion) String() string { return strconv.FormatInt(int64(v), 10) }

// ParseVersion parses the decimal form of a NumericVersion. It returns an
// InvalidArgument *Error for anything else, including negative numbers.
func ParseVersion(s string) (NumericVersion, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, &Error{Code: InvalidArgument, Err: errors.New("bad version " + strconv.Quote(s))}
	}
	return NumericVersion(n), nil
}
