package etcdcluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// bootstrapPath is the HTTP path at which a node waiting for a cluster
// describes itself on its client address (candidateInfo as JSON). An
// etcd member answers it with 404.
const bootstrapPath = "/topokit/bootstrap"

// waitSayEvery is how often a node waiting for a cluster logs what it
// waits for.
const waitSayEvery = 5 * time.Second

// candidateInfo is what a node waiting for a cluster serves at
// bootstrapPath: who it is, the Config.BootstrapExpect it was given, and
// the candidate it endorses as the one to bootstrap, by name and peer URL
// ("" while none). A candidate is its name and peer URL: two nodes given
// one name by mistake are two candidates, and an endorsement of one is
// not the other's. Seeds (the other seeds it probes) and Sees (the names
// of the candidates with its Expect it sees, itself included, sorted)
// only explain its wait (Status's ErrWaitingForCluster); nodes ignore
// them.
type candidateInfo struct {
	Name        string   `json:"name"`
	PeerURL     string   `json:"peerURL"`
	ClientURL   string   `json:"clientURL"`
	Expect      int      `json:"expect"`
	Vote        string   `json:"vote,omitempty"`
	VotePeerURL string   `json:"votePeerURL,omitempty"`
	Seeds       []string `json:"seeds,omitempty"`
	Sees        []string `json:"sees,omitempty"`
}

// is reports whether c and o are the same candidate.
func (c candidateInfo) is(o candidateInfo) bool { return c.Name == o.Name && c.PeerURL == o.PeerURL }

// endorses reports whether c endorses the candidate o.
func (c candidateInfo) endorses(o candidateInfo) bool {
	return c.Vote == o.Name && c.VotePeerURL == o.PeerURL
}

// seedState is what a probe of one seed found.
type seedState int

const (
	seedSilent    seedState = iota // nothing answered
	seedMember                     // an etcd member answered
	seedCandidate                  // a node waiting for a cluster answered
)

// awaitCluster waits, for a node with seeds and no member data, until an
// etcd member answers at one of the seeds (it returns true) or, with
// Config.BootstrapExpect N > 0, until this node is the one chosen to
// bootstrap the cluster (it returns false). It logs every waitSayEvery
// what it waits for, and returns ctx's error when ctx ends first.
//
// The choice: a waiting node that is not ClientOnly serves candidateInfo
// on its client address. Once a node sees N candidates (itself included)
// with the same N, it endorses the lowest name among them (the lowest peer
// URL among candidates of one name), and keeps that
// endorsement while that candidate (or a member at its URL) answers; the
// candidate endorsed by N candidates bootstraps a one-member cluster,
// which the others then find at its URL and join as volunteers. Two
// bootstraps would each need N endorsements, and a node endorses one
// candidate at a time, so with fewer than 2N nodes started with the same
// N only one cluster ever forms.
func (n *Node) awaitCluster(ctx context.Context, seeds []string) (bool, error) {
	own := n.cfg.AdvertiseClientURL
	var others []string
	for _, s := range seeds {
		if !sameURL(s, own) && !slices.Contains(others, s) {
			others = append(others, s)
		}
	}
	tc, err := n.eps.opts.tlsConfig()
	if err != nil {
		return false, err
	}
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()

	expect := n.cfg.BootstrapExpect
	var cs *candidateServer
	if expect > 0 && !n.cfg.ClientOnly {
		cs, err = n.serveCandidate()
		if err != nil {
			return false, err
		}
		defer cs.close()
	}
	self := candidateInfo{Name: n.cfg.Name, PeerURL: n.cfg.AdvertisePeerURL, ClientURL: own, Expect: expect, Seeds: others}
	if cs != nil {
		self.Sees = []string{self.Name}
		cs.set(self) // what it waits for, from the first request on
	}
	lastSaid := time.Now() // first said after waitSayEvery
	lastSeenVote := time.Now()
	var otherExpect []candidateInfo // said once each
	for {
		states, infos := n.probeSeeds(ctx, hc, others)
		if slices.Contains(states, seedMember) {
			return true, nil
		}
		var cands []candidateInfo
		if cs != nil {
			cands = append(cands, self)
			for _, c := range infos {
				if c.Expect == expect && !slices.ContainsFunc(cands, c.is) {
					cands = append(cands, c)
				}
				if c.Expect != expect && !slices.ContainsFunc(otherExpect, func(o candidateInfo) bool { return o.is(c) && o.Expect == c.Expect }) {
					otherExpect = append(otherExpect, c)
					n.log.Warn("bootstrap: a node at the seeds waits with another --bootstrap-expect, so neither counts the other: give every node the same",
						"candidate", c.Name, "clientURL", c.ClientURL, "itsExpect", c.Expect, "expect", expect)
				}
			}
			if self.Vote != "" && !self.endorses(self) {
				if slices.ContainsFunc(cands, self.endorses) {
					lastSeenVote = time.Now()
				} else if time.Since(lastSeenVote) > n.cfg.NomineeTimeout {
					n.log.Warn("the endorsed bootstrap candidate stopped answering: endorsing again", "candidate", self.Vote)
					self.Vote, self.VotePeerURL = "", ""
				}
			}
			if self.Vote == "" && len(cands) >= expect {
				lowest := slices.MinFunc(cands, func(a, b candidateInfo) int {
					return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.PeerURL, b.PeerURL))
				})
				self.Vote, self.VotePeerURL, lastSeenVote = lowest.Name, lowest.PeerURL, time.Now()
				n.log.Info("bootstrap: endorsing the candidate with the lowest name", "candidate", self.Vote, "peerURL", self.VotePeerURL, "candidates", len(cands), "expect", expect)
			}
			self.Sees = candidateNames(cands)
			cs.set(self)
			if self.endorses(self) {
				votes := 1 // our own
				for _, c := range cands[1:] {
					if c.endorses(self) {
						votes++
					}
				}
				if votes >= expect {
					n.log.Info("bootstrap: endorsed by enough candidates: bootstrapping the cluster", "endorsements", votes, "expect", expect)
					return false, nil
				}
			}
		}
		if time.Since(lastSaid) >= waitSayEvery {
			lastSaid = time.Now()
			if expect > 0 && cs != nil {
				names := candidateNames(cands)
				n.log.Warn("waiting for a cluster: no etcd member answers at the seeds; bootstrapping once enough nodes with the same --bootstrap-expect see each other",
					"seeds", strings.Join(others, ","), "candidates", strings.Join(names, ","), "expect", expect, "endorsing", self.Vote)
			} else {
				n.log.Warn("waiting for a cluster: no etcd member answers at the seeds (give --bootstrap-expect to form a new cluster)", "seeds", strings.Join(others, ","))
			}
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("etcdcluster: waiting for a cluster at %s: %w", strings.Join(others, ","), ctx.Err())
		case <-time.After(n.cfg.CheckInterval):
		}
	}
}

// candidateNames returns the names of cs, sorted.
func candidateNames(cs []candidateInfo) []string {
	names := make([]string, 0, len(cs))
	for _, c := range cs {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// probeSeeds asks every seed, in parallel, whether a waiting node or an
// etcd member answers there.
func (n *Node) probeSeeds(ctx context.Context, hc *http.Client, seeds []string) ([]seedState, []candidateInfo) {
	states := make([]seedState, len(seeds))
	infos := make([]*candidateInfo, len(seeds))
	var wg sync.WaitGroup
	for i, s := range seeds {
		wg.Go(func() { states[i], infos[i] = probeSeed(ctx, hc, s) })
	}
	wg.Wait()
	var out []candidateInfo
	for _, c := range infos {
		if c != nil {
			out = append(out, *c)
		}
	}
	return states, out
}

// probeSeed asks seed for a waiting node's candidateInfo, then for etcd's
// version.
func probeSeed(ctx context.Context, hc *http.Client, seed string) (seedState, *candidateInfo) {
	tlsRefused := false
	get := func(path string) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(seed, "/")+path, nil)
		if err != nil {
			return 0, nil
		}
		resp, err := hc.Do(req)
		if err != nil {
			tlsRefused = isTLSError(err) || (errors.Is(err, io.EOF) && speaksTLS(ctx, seed))
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return resp.StatusCode, b
	}
	code, b := get(bootstrapPath)
	if code == 0 {
		if tlsRefused {
			// Something answers but the TLS handshake fails (or TLS
			// answers an http:// seed): let the client's connection say
			// why, as it would to a member.
			return seedMember, nil
		}
		return seedSilent, nil
	}
	var c candidateInfo
	if code == http.StatusOK && json.Unmarshal(b, &c) == nil && c.Name != "" {
		return seedCandidate, &c
	}
	code, b = get("/version")
	var v struct {
		Server string `json:"etcdserver"`
	}
	if code == http.StatusOK && json.Unmarshal(b, &v) == nil && v.Server != "" {
		return seedMember, nil
	}
	return seedSilent, nil
}

// speaksTLS reports whether a TLS server answers at the host of the
// http:// seed, which closed a plaintext request unanswered: a seed given
// as http:// where the members serve clients over TLS.
func speaksTLS(ctx context.Context, seed string) bool {
	u, err := url.Parse(seed)
	if err != nil || u.Scheme != "http" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // only detects whether the server speaks TLS
	c, err := d.DialContext(ctx, "tcp", u.Host)
	if err == nil {
		_ = c.Close()
		return true
	}
	// A TLS 1.2 server refuses a client without a certificate with an
	// alert.
	return strings.Contains(err.Error(), "remote error")
}

// candidateServer serves a waiting node's candidateInfo on its client
// listen address.
type candidateServer struct {
	srv  *http.Server
	mu   sync.Mutex
	info candidateInfo
}

func (c *candidateServer) set(i candidateInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.info = i
}

func (c *candidateServer) close() { _ = c.srv.Close() }

// serveCandidate listens on the node's client address (with the client
// TLS, when on) and serves its candidateInfo there until closed.
func (n *Node) serveCandidate() (*candidateServer, error) {
	u, err := url.Parse(n.cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: listening on the client address %s while waiting for a cluster: %w", u.Host, err)
	}
	if serverTLSOn(n.cfg.ClientTLS) {
		tc, err := n.cfg.ClientTLS.ServerConfig()
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("%w: client TLS: %w", ErrInvalidConfig, err)
		}
		ln = tls.NewListener(ln, tc)
	}
	c := &candidateServer{}
	mux := http.NewServeMux()
	mux.HandleFunc(bootstrapPath, func(w http.ResponseWriter, _ *http.Request) {
		c.mu.Lock()
		b, _ := json.Marshal(c.info)
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	c.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Warn("serving the bootstrap candidacy", "err", err)
		}
	}()
	return c, nil
}

// isTLSError reports whether err is a failed TLS handshake (a
// certificate refused on either side, or TLS spoken to plain HTTP).
func isTLSError(err error) bool {
	var ve *tls.CertificateVerificationError
	var re tls.RecordHeaderError
	if errors.As(err, &ve) || errors.As(err, &re) {
		return true
	}
	m := err.Error()
	return strings.Contains(m, "tls: ") || strings.Contains(m, "x509: ")
}

// sameURL reports whether a and b name the same scheme and host:port.
func sameURL(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	if err1 != nil || err2 != nil {
		return a == b
	}
	return ua.Scheme == ub.Scheme && ua.Host == ub.Host
}
