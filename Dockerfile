# syntax=docker/dockerfile:1
#
# token-broker container image: build with the official Swift image, run on Debian slim.
#
#   docker build -t token-broker .
#   docker run --rm -p 8080:8080 \
#     -v token-broker-state:/var/lib/token-broker \
#     -v "$PWD/deploy/broker.yaml:/etc/token-broker/broker.yaml:ro" \
#     --env-file deploy/broker.env token-broker
#
# The binary links the Swift runtime statically (--static-swift-stdlib, Foundation and
# FoundationNetworking included), so the runtime stage needs only Debian's libmicrohttpd12,
# libgnutls30 (libmicrohttpd's TLS, which the shim also calls itself for an early 413 over
# HTTPS), libcurl4 (OpenSSL; FoundationNetworking's URLSession is libcurl, and the API proxy calls
# it directly), libssl3 (libcrypto), libpq5
# (the PostgreSQL store),
# ca-certificates (TLS to the providers) and libstdc++6/libc6/libgcc-s1, which the slim image
# already has. Tests/deploy/test_dockerfile.py checks that against `ldd` of a built binary.

# The build image: its Swift version should match the one the project is tested with
# (swift-tools-version 6.1 is the oldest that can build it).
ARG SWIFT_IMAGE=swift:6.3.1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---------------------------------------------------------------------------- build stage
FROM ${SWIFT_IMAGE} AS build

# The C libraries of the system-library targets CMicroHTTPD and CLibCrypto (headers and
# pkg-config files), and libcurl's development files for the static FoundationNetworking.
# Not version-pinned (hadolint DL3008): the packages follow Debian 12's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd-dev libssl-dev libpq-dev libcurl4-openssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src

# Resolve the Swift package dependencies in their own layer, so that a change to the sources
# does not fetch them again. (Package.resolved is not committed; resolving writes it.)
COPY Package.swift ./
RUN swift package resolve

COPY Sources ./Sources
# The commit the binary reports (`token-broker version`, broker_build_info): .git is not in the
# build context, so the build names it: docker build --build-arg BROKER_COMMIT=$(git rev-parse
# --short=12 HEAD) . (Compose passes $BROKER_COMMIT). Unnamed, the binary says "unknown".
ARG BROKER_COMMIT=
# --static-swift-stdlib links the Swift runtime and Foundation into the binary. The static
# FoundationNetworking does not name libcurl for the linker (Swift 6.3): -lcurl does, against
# libcurl4-openssl-dev; libcurl itself stays a shared library (libcurl4 at run time).
RUN swift build -c release --product token-broker --static-swift-stdlib -Xlinker -lcurl \
 && install -D -m 0755 "$(swift build -c release --show-bin-path)/token-broker" /out/usr/local/bin/token-broker \
 && strip /out/usr/local/bin/token-broker \
 && /out/usr/local/bin/token-broker version

# -------------------------------------------------------------------------- runtime stage
FROM ${RUNTIME_IMAGE} AS runtime

# Runtime libraries only: no compiler, no -dev packages. curl is for HEALTHCHECK: it adds a
# few hundred kilobytes on top of libcurl4, which the broker needs anyway, and gives a real
# HTTP status check of /healthz (the broker has no health subcommand). Not version-pinned
# (DL3008): a rebuild picks up Debian 12's security updates of OpenSSL, libcurl, libmicrohttpd.
# hadolint ignore=DL3008
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libmicrohttpd12 libgnutls30 libcurl4 libssl3 libpq5 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*

# A fixed non-root user, so that volumes, fsGroup and file secrets can be prepared for it.
ARG BROKER_UID=10001
ARG BROKER_GID=10001
RUN groupadd --system --gid "${BROKER_GID}" token-broker \
 && useradd --system --uid "${BROKER_UID}" --gid token-broker --no-create-home \
        --home-dir /var/lib/token-broker --shell /usr/sbin/nologin token-broker \
 && install -d -o token-broker -g token-broker -m 0700 /var/lib/token-broker \
 && install -d -m 0755 /etc/token-broker

COPY --from=build /out/usr/local/bin/token-broker /usr/local/bin/token-broker
# The default configuration: the example of deploy/ (presets, secrets from the environment).
# Mount your own over it (read-only) or point --config / BROKER_CONFIG elsewhere.
COPY deploy/broker.yaml /etc/token-broker/broker.yaml

# Settings that make sense in any container; BROKER_STATE_KEY and the client secrets come at
# run time (environment or mounted files), never in the image.
ENV BROKER_LISTEN=0.0.0.0:8080 \
    BROKER_STATE_DIR=/var/lib/token-broker \
    BROKER_LOG_FORMAT=json

# Sessions and refresh tokens (encrypted snapshot + journal). A new named volume takes the
# directory's owner (token-broker) from the image.
VOLUME /var/lib/token-broker
WORKDIR /var/lib/token-broker
EXPOSE 8080

USER 10001:10001

# Liveness of the process and its HTTP server, on the port of BROKER_LISTEN: shell form
# (DL3025) so that the port follows a BROKER_LISTEN given at run time. Plain HTTP, or HTTPS when
# the broker serves TLS itself (server.tls_*): -k, as this checks that the server answers on
# loopback, not who it is.
# hadolint ignore=DL3025
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:${BROKER_LISTEN##*:}/healthz" \
     || curl -fsSk -o /dev/null --max-time 2 "https://127.0.0.1:${BROKER_LISTEN##*:}/healthz" || exit 1

# SIGTERM is the broker's graceful shutdown (serve on for server.shutdown_delay_seconds, then
# stop accepting, finish requests within server.shutdown_grace_seconds, write a final
# snapshot): give it longer than both to stop
# (docker stop -t 30, compose stop_grace_period, Kubernetes terminationGracePeriodSeconds).
STOPSIGNAL SIGTERM
ENTRYPOINT ["token-broker"]
CMD ["serve", "--config", "/etc/token-broker/broker.yaml"]
