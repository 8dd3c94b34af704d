package election_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// enableEtcdAuth turns auth on in the etcd at addr, with a root user and a
// user "reader" (password "reader") that may only read keys under prefix.
func enableEtcdAuth(t *testing.T, addr, prefix string) {
	t.Helper()
	ctx := t.Context()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.RoleAdd(ctx, "root")
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.RoleAdd(ctx, "reader")
	require.NoError(t, err)
	_, err = cli.RoleGrantPermission(ctx, "reader", prefix, clientv3.GetPrefixRangeEnd(prefix), clientv3.PermissionType(clientv3.PermRead))
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "reader", "reader")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "reader", "reader")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)
}

// deniedConn recodes errors caused by etcd's permission refusal as
// topo.PermissionDenied, in case the etcd2 backend reports them under
// another code (mapping them is the backend's part of the permission
// work); errors that already carry PermissionDenied pass unchanged.
type deniedConn struct{ topo.Conn }

func recodeDenied(err error) error {
	if err != nil && errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, topo.PermissionDenied) {
		return &topo.Error{Code: topo.PermissionDenied, Err: err}
	}
	return err
}

func (c deniedConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	lp, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return nil, recodeDenied(err)
	}
	return deniedLP{lp}, nil
}

type deniedLP struct{ topo.LeaderParticipation }

func (lp deniedLP) WaitForLeadership() (context.Context, error) {
	ctx, err := lp.LeaderParticipation.WaitForLeadership()
	return ctx, recodeDenied(err)
}

// TestRunnerEtcdReadOnlyUser runs a Runner as an etcd user that may only
// read: the real server refuses the candidacy's write, and Run returns
// PermissionDenied after that one refusal instead of retrying it forever;
// nothing is left in the election.
func TestRunnerEtcdReadOnlyUser(t *testing.T) {
	addr := etcdtest.Start(t)
	const root = "/election-denied"
	enableEtcdAuth(t, addr, root)
	conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}, Username: "reader", Password: "reader"}, root)
	require.NoError(t, err)
	defer conn.Close()

	// The refusal comes from the server.
	_, err = conn.Create(t.Context(), "f", []byte("x"))
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)

	e, err := topoFactory(t, deniedConn{conn}, "a").NewTopoElection(t.Context(), "denied")
	require.NoError(t, err)
	defer e.Close(context.Background())
	campaigns := 0
	r := &election.Runner{
		Election:       e,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     time.Millisecond,
		Permanent: func(err error) bool {
			campaigns++
			return election.IsPermanent(err)
		},
		Work: func(context.Context) error {
			t.Error("Work ran without mastership")
			return nil
		},
	}
	err = runBounded(t, r)
	require.ErrorIs(t, err, topo.PermissionDenied)
	require.Equal(t, 1, campaigns, "the refused campaign was retried")
	id, err := e.Leader(t.Context())
	require.NoError(t, err)
	require.Empty(t, id)
}
