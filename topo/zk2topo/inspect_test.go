package zk2topo

import (
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// TestZKPermsLetters: permission bits render as zkCli shows them, each
// letter for its own bit, in "cdrwa" order.
func TestZKPermsLetters(t *testing.T) {
	for _, tc := range []struct {
		perms int32
		want  string
	}{
		{0, ""},
		{zk.PermAll, "cdrwa"},
		{zk.PermCreate, "c"},
		{zk.PermDelete, "d"},
		{zk.PermRead, "r"},
		{zk.PermWrite, "w"},
		{zk.PermAdmin, "a"},
		{zk.PermRead | zk.PermAdmin, "ra"},
		{zk.PermCreate | zk.PermWrite, "cw"},
	} {
		require.Equalf(t, tc.want, zkPerms(tc.perms), "perms %d", tc.perms)
	}
}
