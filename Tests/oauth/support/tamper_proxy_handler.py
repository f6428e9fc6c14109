"""The HTTP front of support/tamper_proxy.py's TamperProxy: its discovery document, its JWKS, its
token endpoint (forwarded to the real server, the answer's ID token forged), and a plain 404 for
any other path (wrong method on a known path: 405)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Optional
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from .tamper_proxy import TamperProxy


class TamperProxyHandler(BaseHTTPRequestHandler):
    proxy: TamperProxy  # set on the per-proxy subclass
    server_version = "TamperProxy/1"

    def log_message(self, format, *args):  # noqa: A002 - quiet; see proxy.request_log
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", headers=()):
        self.send_response(status)
        seen = set()
        for k, v in headers:
            seen.add(k.lower())
            self.send_header(k, v)
        if "content-type" not in seen:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        with self.proxy._lock:
            self.proxy.request_log.append((self.command, self.path, status))

    def _send_json(self, status: int, obj, extra=()):
        self._send(status, json.dumps(obj).encode("utf-8"), headers=extra)

    def _not_found(self):
        self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _route(self) -> Optional[str]:
        path = urlsplit(self.path).path
        if path in ("/o/.well-known/openid-configuration", "/o/.well-known/openid-configuration/"):
            return "discovery"
        if path in ("/o/jwks/", "/o/jwks"):
            return "jwks"
        if path in ("/o/token/", "/o/token"):
            return "token"
        return None

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        route = self._route()
        if route == "discovery":
            self.proxy._count("discovery_requests")
            self._send_json(200, self.proxy.discovery())
        elif route == "jwks":
            self.proxy._count("jwks_requests")
            self._send_json(200, self.proxy.jwks())
        elif route == "token":
            self._send(405, b"method not allowed\n", "text/plain; charset=utf-8", [("Allow", "POST")])
        else:
            self._not_found()

    do_HEAD = do_GET

    def do_POST(self):
        route = self._route()
        body = self._read_body()
        if route != "token":
            if route is None:
                self._not_found()
            else:
                self._send(405, b"method not allowed\n", "text/plain; charset=utf-8", [("Allow", "GET")])
            return
        self.proxy._count("token_requests")
        try:
            status, headers, data = self.proxy.forward_token_request("POST", list(self.headers.items()), body)
        except OSError as e:
            self._send(502, f"upstream token endpoint failed: {e}\n".encode(), "text/plain; charset=utf-8")
            return
        if status == 200:
            data = self.proxy.rewrite_token_response(data)
        self._send(status, data, headers=headers)

    def _other(self):
        self._read_body()
        if self._route() is None:
            self._not_found()
        else:
            self._send(405, b"method not allowed\n", "text/plain; charset=utf-8")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _other
