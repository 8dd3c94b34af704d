# topokit — see README.md.
GO       ?= go
PKGS     ?= ./...
# The whole suite, all four backends against real servers, with the race
# detector. Budget: about 20 minutes on 2 cores.
TESTFLAGS ?= -race -count=1 -timeout 40m

.PHONY: all build test test-deps lint bench proto serve clean

all: build

## build: compile topoctl into bin/
build:
	$(GO) build -o bin/topoctl ./cmd/topoctl

## serve: run the embedded etcd that topoctl uses by default
serve: build
	./bin/topoctl serve

## test-deps: install ZooKeeper and build Consul when missing
test-deps:
	./scripts/test-deps.sh

## test: install what the tests need, then run every test (real servers)
test: test-deps
	$(GO) test $(TESTFLAGS) $(PKGS)

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: the benchmarks, each beside the raw client on the same server
bench: test-deps
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## proto: regenerate proto/ Go code (needs protoc; installs protoc-gen-go)
proto:
	command -v protoc >/dev/null || (apt-get install -y protobuf-compiler)
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	PATH=$(CURDIR)/bin:$$PATH protoc --go_out=. --go_opt=module=github.com/topokit/topokit -I proto proto/topokit/topodata/*.proto

clean:
	rm -rf bin
