# topokit — see README.md.
GO       ?= go
PKGS     ?= ./...
# The whole suite, all four backends against real servers, with the race
# detector. Budget: about 20 minutes on 2 cores.
TESTFLAGS ?= -race -count=1 -timeout 40m

.PHONY: all build test test-run test-packages test-side test-interop test-deps lint bench bench-vitess proto serve clean

all: build

## build: compile topoctl into bin/
build:
	@echo "building bin/topoctl (the first build compiles etcd, ZooKeeper and Consul clients: it can take minutes)..."
	$(GO) build -o bin/topoctl ./cmd/topoctl

## serve: run the embedded etcd that topoctl uses by default
serve: build
	@echo "starting the embedded etcd (./bin/topoctl serve)..."
	./bin/topoctl serve

## test-deps: install ZooKeeper and build Consul when missing
test-deps:
	./scripts/test-deps.sh

# SIDEPKGS run in the side lane (below), beside the other packages, to
# balance the lanes: ZooKeeper's and Consul's packages are the two longest
# (about 9 minutes each, mostly waiting on their servers). The ZooKeeper
# client (go-zookeeper v1.0.4) races on its last zxid when it reconnects a
# session that has watches (upstream go-zookeeper/zk PR #35, unmerged);
# zk2topo orders the two accesses (see topo/zk2topo/doc.go, "Sessions"),
# so the whole package, partition subtests and mutants included, runs with
# the race detector.
ZKPKG       := github.com/topokit/topokit/topo/zk2topo
CONSULPKG   := github.com/topokit/topokit/topo/consultopo
SIDEPKGS    := $(ZKPKG) $(CONSULPKG)
# CLUSTERPKG runs in the interop lane, before the interop modules.
CLUSTERPKG  := github.com/topokit/topokit/etcdcluster
LANEPKGS    := $(SIDEPKGS) $(CLUSTERPKG)

## test: install what the tests need, then run every test (real servers)
test: test-deps
	@./scripts/with-failure-summary.sh $(MAKE) --no-print-directory test-run

# test-run: every test, without installing anything (make test's body).
# Three lanes run at once, each printing its output when it ends: the
# packages' own go test (two test binaries at a time), the side lane
# (zk2topo, then consultopo) and the interop lane (etcdcluster, then the
# interop modules, etcd2topo's tests with client and server v3.7 among
# them), so that about four test binaries run at any time. The tests
# mostly wait on their servers (a package's test binary and servers use
# about a quarter of a core), so four at a time fit on 2 cores; the lanes
# take about as long as one another (about 15-17 minutes each on an idle
# 2-core machine). TESTLANES=1 runs them one after the other instead.
TESTLANES ?= 3
test-run:
	$(MAKE) --no-print-directory -j$(TESTLANES) -Otarget test-packages test-side test-interop

# ETCDPKG's tests run twice: in test-packages with the main module's etcd
# client against etcd server v3.6 (etcdtest's default), and in
# test-interop from interop/etcd37, whose go.mod requires client v3.7.3,
# against server v3.7.3 (after that module's own tests, not beside them:
# each side lane runs one test binary at a time, so that the lanes keep to
# the load they had). Each client is thus checked whole against the server
# of its own minor version; the mixed pairs, by hand:
#   TOPOKIT_ETCDTEST_SERVER=v3.7.3 go test -race -count=1 ./topo/etcd2topo/...
#   cd interop/etcd37 && go test -race -count=1 github.com/topokit/topokit/topo/etcd2topo
ETCDPKG := github.com/topokit/topokit/topo/etcd2topo
ETCDCLIENT = $(GO) list -m -f '{{.Path}} {{.Version}}' go.etcd.io/etcd/client/v3
# lanepkgs lists the packages of PKGS among $(1).
lanepkgs = $$($(GO) list $(PKGS) | grep -xF $(foreach p,$(1),-e '$(p)'))

# test-packages: every package but LANEPKGS, with the race detector
test-packages:
	@echo "every package below with $$($(ETCDCLIENT)) (the main module's go.mod), etcd server v3.6"
	$(GO) test $(TESTFLAGS) $$($(GO) list $(PKGS) | grep -vxF $(foreach p,$(LANEPKGS),-e '$(p)'))

# test-side: zk2topo, then consultopo (one test binary at a time)
test-side:
	@pkgs="$(call lanepkgs,$(SIDEPKGS))"; \
	if [ -n "$$pkgs" ]; then \
		echo "$(GO) test -p 1 $(TESTFLAGS) $$pkgs"; \
		$(GO) test -p 1 $(TESTFLAGS) $$pkgs; \
	fi

# test-interop: etcdcluster, the interop modules, then etcd2topo's tests
# again from interop/etcd37, with etcd client v3.7.3 against server v3.7.3
test-interop:
	@pkgs="$(call lanepkgs,$(CLUSTERPKG))"; \
	if [ -n "$$pkgs" ]; then \
		echo "$(GO) test $(TESTFLAGS) $$pkgs"; \
		$(GO) test $(TESTFLAGS) $$pkgs; \
	fi
	cd interop/vitess && $(GO) test $(TESTFLAGS) ./...
	@echo "interop/etcd37, and $(ETCDPKG) against etcd server v3.7.3 (etcdtest), with $$(cd interop/etcd37 && $(ETCDCLIENT)) (interop/etcd37's go.mod)"
	cd interop/etcd37 && $(GO) test $(TESTFLAGS) ./...
	cd interop/etcd37 && TOPOKIT_ETCDTEST_SERVER=v3.7.3 $(GO) test $(TESTFLAGS) $(ETCDPKG)


## test-cluster: the self-managing etcd cluster's fault scenarios alone
## (real node processes; make test runs them too, within its budget)
.PHONY: test-cluster bench-cluster
test-cluster:
	$(GO) test $(TESTFLAGS) ./etcdcluster/
	$(GO) test $(TESTFLAGS) -run '^TestServe(Cluster|SymmetricStart)$$' ./topoctl/

## test-churn: contenders for one lock and one election, one cut off at
## a time, on memorytopo, ZooKeeper and Consul (minutes;
## not part of make test)
.PHONY: test-churn
test-churn: test-deps
	$(GO) test $(TESTFLAGS) -tags churn -run '^TestExclusionUnderChurn$$' ./topo/memorytopo/ ./topo/zk2topo/ ./topo/consultopo/

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: the benchmarks, each beside the raw client on the same server
## (median latencies, and requests per op: rt/op, raw-rt/op)
bench: test-deps
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## bench-cluster: client failover (s/max-gap: longest time without an
## acknowledged write when the raft leader is killed or stopped, mean over
## the runs; s/worst-gap the longest), through OpenConn and a plain etcd2
## Conn, with serve's raft timing and etcd's, and graceful leave (s/leave,
## s/worst-leave) of the self-managing etcd cluster (about 15 minutes)
bench-cluster:
	$(GO) test -run '^$$' -bench 'ClientFailover|GracefulLeave' -benchtime 3x ./etcdcluster/

# interop/vitess is a module of its own too (Vitess v0.24.4's Conns and
# topokit's on the same roots of the same servers); the last line of test
# runs it, with the race detector.

# bench-vitess runs bench/vitess, a module of its own (so that ./... never
# builds Vitess): topokit's memorytopo, etcd2topo, zk2topo
# and consultopo beside Vitess v0.24.4's on the same servers. Vitess logs
# to stderr; that goes to VLOG.
VBENCHTIME ?= 100x
VLOG       ?= $${TMPDIR:-/tmp}/topokit-bench-vitess.log

## bench-vitess: topokit beside Vitess v0.24.4 on the same servers
bench-vitess: test-deps
	@echo "Vitess's log: $(VLOG)"
	cd bench/vitess && $(GO) test -run '^$$' -bench . -benchtime $(VBENCHTIME) . 2>$(VLOG)

## proto: regenerate proto/ Go code (needs protoc; installs protoc-gen-go)
proto:
	command -v protoc >/dev/null || (apt-get install -y protobuf-compiler)
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	PATH=$(CURDIR)/bin:$$PATH protoc --go_out=. --go_opt=module=github.com/topokit/topokit -I proto proto/topokit/topodata/*.proto proto/topokit/vschema/*.proto

clean:
	rm -rf bin
