package topo_test

import (
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

func TestNumericVersionString(t *testing.T) {
	require.Equal(t, "0", topo.NumericVersion(0).String())
	require.Equal(t, "42", topo.NumericVersion(42).String())
	require.Equal(t, strconv.FormatInt(math.MaxInt64, 10), topo.NumericVersion(math.MaxInt64).String())
	var v topo.Version = topo.NumericVersion(7)
	require.Equal(t, "7", v.String())
}

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want topo.NumericVersion
	}{{"0", 0}, {"1", 1}, {"42", 42}, {"9223372036854775807", math.MaxInt64}} {
		got, err := topo.ParseVersion(tc.in)
		require.NoErrorf(t, err, "ParseVersion(%q)", tc.in)
		require.Equalf(t, tc.want, got, "ParseVersion(%q)", tc.in)
	}
	for _, in := range []string{"", "-1", "-0x1", "abc", "1.5", " 1", "1 ", "0x10", "9223372036854775808", "1e3"} {
		_, err := topo.ParseVersion(in)
		require.Truef(t, topo.IsErrType(err, topo.InvalidArgument), "ParseVersion(%q): want InvalidArgument, got %v", in, err)
		require.Contains(t, err.Error(), strconv.Quote(in), "the error quotes the bad version")
	}
	// Round trip.
	for _, v := range []topo.NumericVersion{0, 1, 123456789, math.MaxInt64} {
		got, err := topo.ParseVersion(v.String())
		require.NoError(t, err)
		require.Equal(t, v, got)
	}
}
