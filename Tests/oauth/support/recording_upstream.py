"""An API upstream on loopback that records every request it receives (method, path with query,
headers, body) for the API proxy's tests, and answers by path:

  /json              200 {"ok": true} with ETag, Link, rate-limit headers, and Set-Cookie
  /redirect          302 to /elsewhere on this server, with Set-Cookie
  /bytes/N           200 with N bytes (0x61…), sent in 64 KiB chunks
  /chunked/N         200 with N bytes, chunked (no length announced)
  /slow/N            200, chunked: N bytes, then a pause of `slow_pause` seconds, then N more
  /protected         200, or 401 when the bearer token is in `refused_tokens`
  anything else      200 {"path": …}
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RecordingUpstream:
    def __init__(self, host: str = "127.0.0.1"):
        upstream = self
        self.requests: list[dict] = []
        self.refused_tokens: set[str] = set()
        self.slow_pause = 1.5
        self._lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _record(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                entry = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                         "header_names": [k.lower() for k in self.headers.keys()], "body": body}
                with upstream._lock:
                    upstream.requests.append(entry)
                return entry

            def _send(self, status, body=b"", headers=()):
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _answer(self):
                entry = self._record()
                path = self.path.split("?", 1)[0]
                if path == "/json":
                    self._send(200, b'{"ok": true}', [
                        ("Content-Type", "application/json"), ("ETag", '"v1"'), ("Link", '<https://api.example/next>; rel="next"'),
                        ("X-RateLimit-Remaining", "4999"), ("Set-Cookie", "upstream=1; Path=/"), ("X-Internal", "secret-host"),
                    ])
                elif path == "/redirect":
                    self._send(302, b"", [("Location", f"http://{self.headers['Host']}/elsewhere"), ("Set-Cookie", "upstream=1")])
                elif path.startswith("/bytes/"):
                    size = int(path.rsplit("/", 1)[1])
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    sent = 0
                    while sent < size:
                        chunk = min(65536, size - sent)
                        self.wfile.write(b"a" * chunk)
                        sent += chunk
                elif path.startswith("/chunked/") or path.startswith("/slow/"):
                    size = int(path.rsplit("/", 1)[1])
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()

                    def chunk(data: bytes):
                        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                        self.wfile.flush()
                    try:
                        for offset in range(0, size, 65536):
                            chunk(b"b" * min(65536, size - offset))
                        if path.startswith("/slow/"):
                            time.sleep(upstream.slow_pause)
                            for offset in range(0, size, 65536):
                                chunk(b"c" * min(65536, size - offset))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        pass
                elif path == "/protected":
                    token = (entry["headers"].get("authorization") or "").removeprefix("Bearer ")
                    if token in upstream.refused_tokens:
                        self._send(401, b'{"message": "Bad credentials"}', [("Content-Type", "application/json"),
                                                                             ("WWW-Authenticate", 'Bearer error="invalid_token"')])
                    else:
                        self._send(200, b'{"ok": true}', [("Content-Type", "application/json")])
                else:
                    self._send(200, json.dumps({"path": self.path}).encode(), [("Content-Type", "application/json")])

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        self._server = ThreadingHTTPServer((host, 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base_url = f"http://{host}:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def last(self) -> dict:
        with self._lock:
            return self.requests[-1]

    def close(self):
        self._server.shutdown()
        self._server.server_close()
