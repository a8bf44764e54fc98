# memd — `make run` builds and runs memd on a demo memory repo; `make test` runs every check.
GO        ?= go
PREFIX    ?= $(HOME)/.local
BIN       := bin/memd
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
STATICCHECK_VERSION := v0.8.2
STATICCHECK := $(shell $(GO) env GOPATH)/bin/staticcheck
DEMO      ?= .demo/memory
FUZZTIME  ?= 60s
DURATION  ?= 10m

.PHONY: all build run test test-go lint cross fuzz fuzz-short bench reliability soak install clean readme-check

all: build

# Static (no cgo): nothing in memd needs libc, and a binary without the dynamic loader starts
# about a millisecond sooner, which `memd status` in a prompt pays on every draw.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/memd

# A demo memory repo in .demo/ (never committed), then the agent in the foreground.
# Open http://127.0.0.1:47100/ to watch it; Ctrl-C stops it.
run: build
	@test -d $(DEMO)/.git || ./$(BIN) init $(DEMO) --demo
	./$(BIN) run --repo $(DEMO)

test: lint cross test-go fuzz-short readme-check

test-go:
	$(GO) test -race -count=1 -timeout 15m ./...

$(STATICCHECK):
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

# The macOS build (launchd users) and arm64 must never break unseen.
cross:
	GOOS=linux  GOARCH=arm64 $(GO) build -o /dev/null ./...
	GOOS=darwin GOARCH=amd64 $(GO) build -o /dev/null ./...
	GOOS=darwin GOARCH=arm64 $(GO) build -o /dev/null ./...

# Every fuzz target briefly (make test) or for FUZZTIME each (make fuzz).
fuzz-short:
	@FUZZTIME=5s ./scripts/fuzz.sh

fuzz:
	@FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# The README's marked shell blocks, run as written (scripts/readmecheck), so a README that
# stops working fails the build.
readme-check: build
	./scripts/readme-check.sh

bench: build
	./bench/run.sh

reliability: build
	MEMD_RELIABILITY=long $(GO) test -count=1 -timeout 80m -run 'Reliability' -v ./reliability/

soak: build
	MEMD_SOAK=$(DURATION) $(GO) test -count=1 -timeout 0 -run 'Soak' -v ./reliability/

install: build
	install -d $(PREFIX)/bin
	install -m 0755 $(BIN) $(PREFIX)/bin/memd

clean:
	rm -rf bin .demo
