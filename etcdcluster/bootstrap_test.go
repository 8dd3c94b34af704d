package etcdcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSymmetricStart starts 2, then 3, empty nodes at the same time with
// the same seeds (every node's client URL, its own included) and the same
// BootstrapExpect: exactly one of them bootstraps, the others join it,
// and the cluster grows to all of them, one cluster ID behind every URL.
// Without BootstrapExpect such nodes would only wait for a cluster.
func TestSymmetricStart(t *testing.T) {
	for _, size := range []int{2, 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			h := newHarness(t)
			var names, seeds []string
			for i := range size {
				name := string(rune('a' + i))
				names = append(names, name)
				seeds = append(seeds, h.prepare(name).cfg.ClientURL)
			}
			for _, name := range names {
				p := h.procs[name]
				p.cfg.Seeds = slices.Clone(seeds)
				p.cfg.BootstrapExpect = size
			}
			for _, name := range names {
				h.procs[name].run()
			}
			// NewClient refuses endpoints of different clusters.
			cli := h.client(names...)
			st := waitVoters(t, cli, bound, names...)
			require.Equal(t, size, st.IdealSize)
			bootstraps := 0
			for _, name := range names {
				bootstraps += h.procs[name].logCount("bootstrapping a new one-member cluster")
			}
			require.Equal(t, 1, bootstraps, "exactly one node bootstrapped")
			sameData(t, cli, bound)
		})
	}
}

// TestBootstrapEndorsementNamesOneNode starts a node "a" with
// BootstrapExpect 2 whose seeds answer as two waiting nodes: "a" again at
// a lower peer URL (a second node given the same name by mistake) and
// "b", which endorses that other "a". The endorsement is the other
// node's: "a" must endorse it too and keep waiting, not count b's vote
// as its own and bootstrap a cluster beside the one the other "a" would
// bootstrap.
func TestBootstrapEndorsementNamesOneNode(t *testing.T) {
	// As served at bootstrapPath: a node's name, URLs and BootstrapExpect,
	// and the name and peer URL of the node it endorses.
	twin := map[string]any{"name": "a", "peerURL": "http://127.0.0.1:1", "clientURL": "http://127.0.0.1:2", "expect": 2,
		"vote": "a", "votePeerURL": "http://127.0.0.1:1"}
	b := map[string]any{"name": "b", "peerURL": "http://127.0.0.1:3", "clientURL": "http://127.0.0.1:4", "expect": 2,
		"vote": "a", "votePeerURL": "http://127.0.0.1:1"}
	seeds := []string{fakeCandidate(t, twin), fakeCandidate(t, b)}
	cfg := localConfig(t, "a")
	cfg.Seeds, cfg.BootstrapExpect = seeds, 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() {
		n, err := Start(ctx, cfg)
		if err == nil {
			n.Close()
		}
		started <- err
	}()
	// Wait until "a" serves its endorsement of its twin.
	hc := &http.Client{Timeout: time.Second}
	endorsed := func() bool {
		resp, err := hc.Get(cfg.ClientURL + bootstrapPath)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var c map[string]any
		return json.NewDecoder(resp.Body).Decode(&c) == nil && c["vote"] == twin["vote"] && c["votePeerURL"] == twin["votePeerURL"]
	}
	deadline := time.After(bound)
	for !endorsed() {
		select {
		case err := <-started:
			t.Fatalf("Start returned (%v) instead of waiting: the node bootstrapped on its twin's endorsement", err)
		case <-deadline:
			t.Fatal("the node never endorsed its twin, the candidate with the lowest name and peer URL")
		case <-time.After(cfg.CheckInterval):
		}
	}
	cancel()
	require.ErrorIs(t, <-started, context.Canceled)
}

// fakeCandidate serves info at bootstrapPath, as a node waiting for a
// cluster does, until the test ends; it returns its URL.
func fakeCandidate(t *testing.T, info map[string]any) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != bootstrapPath {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(info)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBootstrapExpectMismatchSaid: a node waiting with BootstrapExpect 2
// whose seed answers as a node waiting with 3 says so at once: neither
// counts the other, and both would otherwise wait forever, each saying
// only which candidates it counts.
func TestBootstrapExpectMismatchSaid(t *testing.T) {
	other := map[string]any{"name": "b", "peerURL": "http://127.0.0.1:1", "clientURL": "http://127.0.0.1:2", "expect": 3}
	cfg := localConfig(t, "a")
	cfg.Seeds, cfg.BootstrapExpect = []string{fakeCandidate(t, other)}, 2
	var logs bytes.Buffer
	var mu sync.Mutex
	cfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan error, 1)
	go func() {
		n, err := Start(ctx, cfg)
		if err == nil {
			n.Close()
		}
		started <- err
	}()
	said := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), "waits with another --bootstrap-expect") && strings.Contains(logs.String(), "itsExpect=3")
	}
	require.Eventually(t, said, bound, cfg.CheckInterval, "the node did not say that b expects 3")
	cancel()
	require.ErrorIs(t, <-started, context.Canceled)
}
