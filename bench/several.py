"""Several brokers on one PostgreSQL database, for bench/run.py (`--postgres`): the single-flight
of 1,000 callers spread over three instances, and how long after a revocation on one instance
another still answers the session's token. Standard library only.

The instances refresh at a stand-in provider in this process (`StandIn`): an OAuth token
endpoint that rotates refresh tokens and counts the refreshes it makes, and a revocation
endpoint. The development provider cannot serve here: each broker process has its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StandIn:
    """A token endpoint (refresh_token grant only) and a revocation endpoint on 127.0.0.1."""

    def __init__(self) -> None:
        self.refreshes = 0
        self.revocations = 0
        counter = itertools.count(1)
        lock = threading.Lock()
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode())
                if self.path == "/token" and form.get("grant_type") == ["refresh_token"]:
                    with lock:
                        stand_in.refreshes += 1
                        n = next(counter)
                    body = {"access_token": f"stand-in-access-{n}", "token_type": "Bearer", "expires_in": 172_800,
                            "refresh_token": f"stand-in-refresh-{n}"}
                    self.answer(200, json.dumps(body).encode())
                elif self.path == "/revoke":
                    with lock:
                        stand_in.revocations += 1
                    self.answer(200, b"")
                else:
                    self.answer(400, b'{"error":"unsupported_grant_type"}')

            def answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def config(self, provider: str, app: str, redirect_uri: str) -> str:
        """A broker configuration whose `provider` is this stand-in (secret: BENCH_CLIENT_SECRET)."""
        base = f"http://127.0.0.1:{self.port}"
        return (f"server:\n  shutdown_grace_seconds: 2\nproviders:\n  {provider}:\n"
                f"    authorization_endpoint: {base}/authorize\n    token_endpoint: {base}/token\n"
                f"    revocation_endpoint: {base}/revoke\n    client_id: bench\n    client_secret_env: BENCH_CLIENT_SECRET\n"
                f"apps:\n  {app}:\n    redirect_uris: [{redirect_uri}]\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


async def crowd(connection_class, ports: list[int], token: str, callers: int, min_ttl: int) -> dict:
    """`callers` connections spread over the instances, opened first; then every one sends
    `GET /token?min_ttl=...` at once."""
    connections = [connection_class(ports[n % len(ports)]) for n in range(callers)]
    await asyncio.gather(*(c.open() for c in connections))
    raw = connection_class.encode("GET", f"/token?min_ttl={min_ttl}", {"Authorization": f"Bearer {token}"})
    for c in connections:
        c.send(raw)
    started = time.monotonic()
    answers = await asyncio.gather(*(asyncio.wait_for(c.receive(), 30) for c in connections), return_exceptions=True)
    elapsed = time.monotonic() - started
    for c in connections:
        c.close()
    statuses: dict[str, int] = {}
    access_tokens = set()
    for answer in answers:
        status = "error" if isinstance(answer, BaseException) else str(answer[0])
        statuses[status] = statuses.get(status, 0) + 1
        if status == "200":
            access_tokens.add(json.loads(answer[2])["access_token"])
    return {"statuses": statuses, "distinct_access_tokens": len(access_tokens), "seconds": elapsed}


async def revocation_delays(connection_class, revoking: int, serving: int, tokens: list[str]) -> list[float]:
    """For each session: read its token on `serving` (now in that instance's cache), revoke it on
    `revoking`, then ask `serving` again and again until it answers 401. The time from the
    revocation's answer to that 401: how long another instance still hands out a revoked
    session's token."""
    revoker, server = connection_class(revoking), connection_class(serving)
    delays = []
    try:
        for token in tokens:
            bearer = {"Authorization": f"Bearer {token}"}
            status, _, _ = await server.request("GET", "/token", bearer)
            assert status == 200, f"GET /token before the revocation: {status}"
            status, _, _ = await revoker.request("POST", "/revoke", bearer)
            assert status == 200, f"POST /revoke: {status}"
            revoked = time.monotonic()
            while (await server.request("GET", "/token", bearer))[0] == 200:
                if time.monotonic() - revoked > 10:
                    raise RuntimeError("a revoked session was still served after 10 s")
            delays.append(time.monotonic() - revoked)
    finally:
        revoker.close()
        server.close()
    return delays


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(delays: list[float]) -> str:
    return (f"p50 {statistics.median(delays) * 1000:.2f} ms, p99 {percentile(delays, 0.99) * 1000:.2f} ms, "
            f"max {max(delays) * 1000:.2f} ms over {len(delays)} revocations")
