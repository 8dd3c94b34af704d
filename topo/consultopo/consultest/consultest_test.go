package consultest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func leader(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/v1/status/leader")
	require.NoError(t, err)
	defer resp.Body.Close()
	var l string
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&l))
	return l
}

func TestStartRestart(t *testing.T) {
	a := StartAgent(t)
	require.NotEmpty(t, leader(t, a.Addr()))

	a.Kill()
	_, err := http.Get("http://" + a.Addr() + "/v1/status/leader")
	require.Error(t, err, "a killed agent refuses connections")

	require.NoError(t, a.Start())
	require.NotEmpty(t, leader(t, a.Addr()))

	a.Restart(t)
	require.NotEmpty(t, leader(t, a.Addr()))
}

func TestStartTwo(t *testing.T) {
	a, b := Start(t), Start(t)
	require.NotEqual(t, a, b)
	require.NotEmpty(t, leader(t, a))
	require.NotEmpty(t, leader(t, b))
	require.FileExists(t, Binary(t))
}

func TestPersistentKeepsKeys(t *testing.T) {
	a := StartAgentWithOptions(t, AgentOptions{Persistent: true})
	url := "http://" + a.Addr() + "/v1/kv/k"
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader("v"))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	a.Restart(t)
	resp, err = http.Get(url + "?raw")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "v", string(b))
}
