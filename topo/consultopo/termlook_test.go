package consultopo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestTermEndedBeforeFirstLook runs the shared scenario (a term ended in
// Consul before its leader looked at it: its key deleted, its session
// destroyed by a raw client, Stop) on the package's agent.
func TestTermEndedBeforeFirstLook(t *testing.T) {
	root := testRoot(t)
	raw := rawClient(t)
	test.TermEndedBeforeFirstLook(t, func(t *testing.T) topo.Conn { return newTestConn(t, root) }, test.TermEnd{
		DeleteTerm: func(t *testing.T, _ topo.Conn, election string) {
			_, err := raw.KV().Delete(root+"/elections/"+election, nil)
			require.NoError(t, err)
		},
		LoseSession: func(t *testing.T, _ topo.Conn, election string) {
			pair, _, err := raw.KV().Get(root+"/elections/"+election, nil)
			require.NoError(t, err)
			require.NotNil(t, pair, "the term's key")
			require.NotEmpty(t, pair.Session, "the term's session")
			_, err = raw.Session().Destroy(pair.Session, nil)
			require.NoError(t, err)
		},
	})
}
