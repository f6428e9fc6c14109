"""The targets of the benchmark's wrk rounds (bench/run.py): their names (the table's rows) and
short labels, `Target`, and one wrk run against a target with what it cost."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Callable

import tls_peers
from processes import CLK_TCK, cpu_list, cpu_ticks


HERE = os.path.dirname(os.path.abspath(__file__))

SAMPLE = 200_000  # session tokens wrk picks from, at random out of the large state
# The targets of the wrk rounds (the table's rows, in this order) and their short labels.
TOKEN = "broker GET /token (access log on, default)"
NOLOG = "broker GET /token (BROKER_LOG_ACCESS=false)"
DPOP = "broker GET /token, a session bound to a key: a new DPoP proof (ES256) on each request (access log on)"
DPOP_PROOFS_PER_SECOND = 25_000  # proofs made for each second of a DPoP run: more than the broker answers
HEALTHZ = "broker GET /healthz"
BASELINE = "baseline build: broker GET /token (access log on)"
POSTGRES = "PostgreSQL store: broker GET /token (access log on)"
ENVOY_DIRECT = "Envoy OAuth2 filter, signed-in cookies → direct_response, same bytes (Envoy CPU)"
BARE = "bare libmicrohttpd, same bytes"
BARE_FRESH = "bare libmicrohttpd, same bytes, a response made for each request"
PROXY = "API proxy: broker GET /proxy/api/token → nginx (broker CPU)"
ENVOY_FILTER = "Envoy OAuth2 filter, signed-in cookies → nginx (Envoy CPU)"
ENVOY_PLAIN = "Envoy, no filter → nginx (Envoy CPU)"
NGINX = "nginx directly: return 200, same bytes"
FLOOR_SPLIT = "floor: libmicrohttpd + libcurl, server threads → one libcurl thread (the broker's design) → nginx"
FLOOR_ONE = "floor: libmicrohttpd + libcurl, one thread per request end to end → nginx"
PROXY_SESSIONS = 1000  # the proxy's sessions; wrk picks one at random for each request
FLOOR_SHARED = ("floor, the broker's design with libcurl set as the broker sets it: its options, "
                "one pool of connections every request shares (api_connections: shared), its check of a reused "
                "connection; the broker's answer headers → nginx")
# Over TLS (bench/tls_peers.py): nginx's TLS server block, a private CA's certificate.
PAUSE = tls_peers.PAUSE
PROXY_TLS = (f"API proxy over TLS: broker GET /proxy/tlsapi/token → nginx https, one of {PROXY_SESSIONS:,} sessions "
             f"at random each request, {PAUSE} ms pauses (broker CPU)")
PROXY_TLS_BUSY = "API proxy over TLS: broker GET /proxy/tlsapi/token → nginx https, one busy session, no pauses (broker CPU)"
PROXY_TLS_PACED = f"API proxy over TLS: broker GET /proxy/tlsapi/token → nginx https, one session, {PAUSE} ms pauses (broker CPU)"
WARM_UP_SECONDS = 1  # of the same load before each TLS row's measured run: its connection counts are the steady state's
ENVOY_FILTER_TLS = f"Envoy OAuth2 filter, signed-in cookies → nginx https, {PAUSE} ms pauses (Envoy CPU)"
ENVOY_PLAIN_TLS = f"Envoy, no filter → nginx https, {PAUSE} ms pauses (Envoy CPU)"
LABELS = {TOKEN: "/token", NOLOG: "/token no access log", DPOP: "/token with DPoP", HEALTHZ: "/healthz", BASELINE: "baseline /token",
          POSTGRES: "postgres /token", ENVOY_DIRECT: "Envoy filter direct", BARE: "bare MHD", BARE_FRESH: "bare MHD, fresh response", PROXY: "proxy → nginx",
          ENVOY_FILTER: "Envoy filter → nginx", ENVOY_PLAIN: "Envoy → nginx", NGINX: "nginx",
          FLOOR_SPLIT: "floor, split → nginx", FLOOR_ONE: "floor, one thread → nginx",
          FLOOR_SHARED: "floor, split, one pool → nginx", PROXY_TLS: "proxy → nginx https, spread",
          PROXY_TLS_BUSY: "proxy → nginx https, one busy session", PROXY_TLS_PACED: "proxy → nginx https, one session, paced",
          ENVOY_FILTER_TLS: "Envoy filter → nginx https, spread",
          ENVOY_PLAIN_TLS: "Envoy → nginx https, spread"}
BEARER = "Authorization: Bearer "  # token.lua's header: this prefix, then a line of the tokens file


@dataclass
class Target:
    """One server of the wrk rounds: `pids` (called each round) are the processes whose CPU is
    its cost; `api`, for a proxy, the API's (nginx's) processes, whose CPU is counted apart."""
    name: str
    port: int
    path: str
    pids: Callable[[], list[int]]
    tokens: str
    header: str = BEARER
    api: Callable[[], list[int]] | None = None
    api_accepts: Callable[[], int] | None = None  # connections the API has accepted so far
    pause: str | None = None  # token.lua's PAUSE: "5-20" ms before each request of a connection
    tls_log: tls_peers.AccessLog | None = None  # the TLS API's log: its new connections and full handshakes
    upstream: Callable[[], tuple[int, int]] | None = None  # the broker's own count of API connections opened, reused
    prepare: Callable[[int], None] | None = None  # makes `tokens` anew before each run of this many seconds (DPoP proofs)
    pick: str | None = None  # token.lua's PICK: "once:2", each line once
    warm_up: bool = False  # WARM_UP_SECONDS of the same load first, its new API connections counted apart


def parse_duration(text: str) -> float:
    """wrk's '812.00us', '1.20ms', '2.00s' in milliseconds."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not match:
        raise ValueError(text)
    value, unit = float(match.group(1)), match.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def wrk(target: Target, seconds: int, wrk_cpus: set[int] | None) -> str:
    """What wrk prints after `seconds` of `target`'s load; on `wrk_cpus` when given."""
    return subprocess.run(
        (["taskset", "-c", cpu_list(wrk_cpus)] if wrk_cpus else [])
        + ["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", "-s", os.path.join(HERE, "token.lua"),
           f"http://127.0.0.1:{target.port}", "--", target.tokens, target.path, target.header, target.pause or "",
           *([target.pick] if target.pick else [])],
        capture_output=True, text=True, timeout=seconds + 60,
    ).stdout


def run_wrk(target: Target, seconds: int, wrk_cpus: set[int] | None = None) -> dict:
    """One wrk run against `target`; on `wrk_cpus` when given. A target that warms up first
    (`warm_up`) has the connections its warm-up opened to the API counted apart, as
    `cold_connections`: the measured run's counts are those of a steady load."""
    pids, api = target.pids(), target.api() if target.api else []
    accepts = target.api_accepts or (lambda: 0)
    upstream = target.upstream or (lambda: (0, 0))
    if target.tls_log:
        target.tls_log.read()  # what came before this run
    cold = 0
    if target.warm_up:
        wrk(target, WARM_UP_SECONDS, wrk_cpus)
        if target.tls_log:
            time.sleep(0.1)
            cold = target.tls_log.read().connections
    if target.prepare:
        target.prepare(seconds)
    upstream_before = upstream()
    before, api_before, accepts_before = cpu_ticks(pids), cpu_ticks(api), accepts()
    output = wrk(target, seconds, wrk_cpus)
    after, api_after, accepts_after = cpu_ticks(pids), cpu_ticks(api), accepts()
    upstream_after = upstream()
    if target.tls_log:
        time.sleep(0.1)  # nginx writes a request's line once its answer is sent
    tls = target.tls_log.read() if target.tls_log else tls_peers.Counts()
    if not re.search(r"^\s+99%", output, re.M):
        raise RuntimeError(f"wrk on port {target.port} printed no latency distribution:\n{output}")
    requests = int(re.search(r"(\d+) requests in ([\d.]+)(\w+)", output).group(1))
    duration = parse_duration(re.search(r"\d+ requests in ([\d.]+\w+)", output).group(1)) / 1000
    latency = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+[a-z]+)\s*$", output, re.M))
    if len(latency) != 2:
        raise RuntimeError(f"wrk on port {target.port}: no p50 or p99 in its latency distribution:\n{output}")
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: (.*)", output)
    return {
        "rps": requests / duration,
        "p50": parse_duration(latency["50"]),
        "p99": parse_duration(latency["99"]),
        "cpu_us": (after - before) / CLK_TCK * 1e6 / max(requests, 1),
        "api_cpu_us": (api_after - api_before) / CLK_TCK * 1e6 / max(requests, 1),
        "api_connections": accepts_after - accepts_before - (1 if target.api_accepts else 0),  # less the second probe's own
        "bad": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(1) if errors else "",
        "requests": requests,
        "tls_connections": tls.connections,
        "cold_connections": cold,
        "tls_handshakes": tls.handshakes,
        "tls_protocols": tls.protocols,
        "opened": upstream_after[0] - upstream_before[0],
        "reused": upstream_after[1] - upstream_before[1],
    }
