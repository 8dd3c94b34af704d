package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/ui"
)

// tagVersion is a custom backend's Version: not a topo.NumericVersion,
// and not a decimal number either.
type tagVersion int64

func (v tagVersion) String() string { return "v" + strconv.FormatInt(int64(v), 10) }

// taggedConn is a Conn whose files carry tagVersions, as a custom backend
// with a Version type of its own would: its compare-and-set refuses any
// other Version type.
type taggedConn struct{ topo.Conn }

func (c taggedConn) untag(v topo.Version) (topo.Version, error) {
	if v == nil {
		return nil, nil
	}
	t, ok := v.(tagVersion)
	if !ok {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("not this backend's version")}
	}
	return topo.NumericVersion(t), nil
}

func tag(v topo.Version, err error) (topo.Version, error) {
	if err != nil {
		return nil, err
	}
	n, _ := strconv.ParseInt(v.String(), 10, 64)
	return tagVersion(n), nil
}

func (c taggedConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	b, v, err := c.Conn.Get(ctx, p)
	tv, err := tag(v, err)
	return b, tv, err
}

func (c taggedConn) Create(ctx context.Context, p string, b []byte) (topo.Version, error) {
	return tag(c.Conn.Create(ctx, p, b))
}

func (c taggedConn) Update(ctx context.Context, p string, b []byte, v topo.Version) (topo.Version, error) {
	nv, err := c.untag(v)
	if err != nil {
		return nil, err
	}
	return tag(c.Conn.Update(ctx, p, b, nv))
}

func (c taggedConn) Delete(ctx context.Context, p string, v topo.Version) error {
	nv, err := c.untag(v)
	if err != nil {
		return err
	}
	return c.Conn.Delete(ctx, p, nv)
}

// TestEditCustomVersionType: saving and deleting from the page work on a
// backend whose Version type is its own (the compare-and-set is on the
// Version value the store returned, matched by its String), and a stale
// version is still a conflict that writes nothing.
func TestEditCustomVersionType(t *testing.T) {
	var tc taggedConn
	h := newHarness(t, true, func(o *ui.Options) {
		tc = taggedConn{o.Conn}
		o.Conn = tc
	})
	ctx := context.Background()
	v, err := tc.Create(ctx, "a/b", []byte("one"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(v.String(), "v"))

	status, body := h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v.String()+`","format":"text","value":"two"}`)
	require.Equal(t, http.StatusOK, status, body)
	b, nv, err := tc.Get(ctx, "a/b")
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))

	// The version the page showed first is stale now: 409, nothing written.
	status, body = h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v.String()+`","format":"text","value":"three"}`)
	require.Equal(t, http.StatusConflict, status, body)
	b, _, err = tc.Get(ctx, "a/b")
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))

	status, body = h.write("DELETE", "/api/file?path=/a/b&version="+nv.String(), "")
	require.Equal(t, http.StatusOK, status, body)
	_, _, err = tc.Get(ctx, "a/b")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
}
