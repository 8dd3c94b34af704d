package backendkit

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOrDefault: a positive value stays, zero and negative ones give the
// default.
func TestOrDefault(t *testing.T) {
	require.Equal(t, 3*time.Second, OrDefault(3*time.Second, time.Minute))
	require.Equal(t, time.Minute, OrDefault(0, time.Minute))
	require.Equal(t, 64, OrDefault(-1, 64))
}

// TestSplitAddresses: trimmed, empty items dropped, nil for none.
func TestSplitAddresses(t *testing.T) {
	require.Equal(t, []string{"a:1", "b:2"}, SplitAddresses(" a:1, ,b:2 ,"))
	require.Nil(t, SplitAddresses(" , "))
}

// TestReadSecretFile: a small file is read whole; a larger one, or an
// endless one, is refused after MaxSecretFileSize+1 bytes.
func TestReadSecretFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte("secret\n"), 0o600))
	b, err := ReadSecretFile(p)
	require.NoError(t, err)
	require.Equal(t, "secret\n", string(b))
	require.NoError(t, os.WriteFile(p, make([]byte, MaxSecretFileSize), 0o600))
	b, err = ReadSecretFile(p)
	require.NoError(t, err)
	require.Len(t, b, MaxSecretFileSize)
	require.NoError(t, os.WriteFile(p, make([]byte, MaxSecretFileSize+1), 0o600))
	_, err = ReadSecretFile(p)
	require.ErrorContains(t, err, "not a credentials file")
	_, err = ReadSecretFile("/dev/zero")
	require.ErrorContains(t, err, "not a credentials file")
	_, err = ReadSecretFile(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
