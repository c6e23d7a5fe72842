# toy's build. `make` builds bin/toy for the cpu target with ggml compiled for this machine's SIMD.
#
#   make [target=cpu]     build bin/toy (the backend is fixed at build time)
#   make portable=1       build for any x86-64-v3 (AVX2/FMA/F16C) machine instead of this one
#   make test             the test suite (what CI runs), including a short fuzz of the GGUF reader
#   make generate         regenerate generated/ from specs/ (go generate ./...)
#   make check-generated  fail if generated/ differs from a fresh generation
#   make bench            the Go benchmarks behind docs/PERFORMANCE.md
#   make demo             the main job on its default: train the demo model on Go's source (~2 min)
#   make clean
#
# ggml's cgo package passes no -march, so without these flags its kernels are scalar (about 16x
# slower). Both variables are needed: C files read CGO_CFLAGS, the C++ kernels CGO_CXXFLAGS.
# They are part of Go's build-cache key: changing them rebuilds ggml (about a minute).

target   ?= cpu
portable ?=
GO       ?= go

GOARCH := $(shell $(GO) env GOARCH)
ifeq ($(portable),)
  ARCH_FLAGS := -march=native
else ifeq ($(GOARCH),arm64)
  ARCH_FLAGS := -march=armv8.2-a+dotprod+fp16
else
  ARCH_FLAGS := -march=x86-64-v3
endif

export CGO_ENABLED  := 1
export CGO_CFLAGS   := -O3 $(ARCH_FLAGS)
export CGO_CXXFLAGS := -O3 $(ARCH_FLAGS)

ifeq ($(target),cpu)
  TAGS :=
else ifneq ($(filter $(target),cuda metal),)
  $(error target '$(target)' is declared but not built yet: only target=cpu exists today (see docs/BUILD.md))
else
  $(error unknown target '$(target)': use cpu (cuda and metal are planned))
endif

FUZZTIME ?= 15s

.PHONY: all build test generate check-generated vet bench demo clean

all: build

build:
	$(GO) build $(TAGS) -o bin/toy ./cmd/toy

generate:
	$(GO) generate ./...

check-generated: generate
	git diff --exit-code -- generated/
	@test -z "$$(git status --porcelain -- generated/)" || { git status --porcelain -- generated/; echo "generated/ has files go generate made that are not committed"; exit 1; }

vet:
	$(GO) vet ./...
	$(GO) vet -tags cuda ./...
	$(GO) vet -tags metal ./...

test:
	$(GO) test $(TAGS) ./...
	$(GO) test -tags cuda ./engines/kernelrt ./generated/kernels
	$(GO) test ./internal/gguffile -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s
	$(GO) test ./ggml -run '^$$' -fuzz '^FuzzOpenGGUF$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 2s

bench:
	$(GO) test $(TAGS) -run '^$$' -bench . -benchtime 3x ./ggml

demo: build
	./bin/toy train

clean:
	rm -rf bin
