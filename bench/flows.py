"""A small HTTP/1.1 keep-alive client on asyncio streams, for the benchmark's logins, refreshes
and single-flight (bench/run.py): the README's walk-through as a login, loads of them and of
refreshes, and a burst of callers on one due session."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import time
import urllib.parse

import several
from processes import CLK_TCK, Broker, cpu_ticks


REDIRECT_URI = "http://127.0.0.1/callback"


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
    """`callers` connections, opened first; then every one sends GET /token?min_ttl=... at once
    (bench/several.py's crowd, on one instance)."""
    return await several.crowd(Connection, [port], token, callers, min_ttl)
