# kubesched's task runner. `make demo` and `make test` are the README's two commands.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint unit e2e bench binaries prometheus iproute2 chromium clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(STAMP)

## Set up, bring up the local control plane, and schedule an example workload on it.
demo: $(STAMP)
	$(BIN)/kubesched demo

## Set up and run every check and test: lint, types, layers, unit, end-to-end.
test: $(STAMP) lint binaries prometheus iproute2 chromium
	$(BIN)/pytest -q tests/unit
	$(BIN)/pytest -q tests/e2e

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

e2e: $(STAMP) binaries prometheus iproute2 chromium
	$(BIN)/pytest -q tests/e2e

## Build (once, cached by version) etcd, kube-apiserver, kube-scheduler, kubectl, for the
## image-compatibility tests nfd-master and two OCI registries (hack/nfd, hack/registry), and
## the binder `bench e2e` measures as the API server's ceiling (hack/binder).
binaries: $(STAMP)
	$(BIN)/kubesched cluster binaries

## Debian's prometheus, which the end-to-end tests of NetworkTraffic, SafeOverload and
## annotate-nodes start (installed when missing; CI runs as root).
prometheus:
	command -v prometheus || (apt-get update && apt-get install -y prometheus)

## iproute2's `ip`, which brings up lo in the network namespace nfd-master runs in (tests/netns.py)
## for the image-compatibility tests; `unshare` is util-linux's, always there.
iproute2:
	command -v ip || test -x /usr/sbin/ip || (apt-get update && apt-get install -y iproute2)

## Debian's chromium, which the browser tests of `kubesched ui` drive headless through
## Playwright (a dev dependency; pointed at this browser, it downloads none of its own).
chromium:
	command -v chromium || (apt-get update && apt-get install -y chromium)

bench: $(STAMP)
	$(BIN)/kubesched bench core --nodes 5000 --pods 10000

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
