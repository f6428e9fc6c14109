"""An API upstream on loopback that records every request it receives (method, path with query,
headers, body) for the API proxy's tests, and answers by path:

  /json              200 {"ok": true} with ETag, Link, rate-limit headers, and Set-Cookie
  /hop               200 {"ok": true} with ETag and a rate-limit header that its Connection lists
  /redirect          302 to /elsewhere on this server, with Set-Cookie
  /bytes/N           200 with N bytes (0x61…), sent in 64 KiB chunks; when the sending ends
                     (whole, or the connection closed) its time goes into `bytes_ended`
  /gate/N            as /bytes/N, once the number `hold_gate` set of requests to /gate/ have
                     arrived (10 s at most): calls made together are all under way before any
                     answer begins; with `?stall`, the head alone, then nothing until the
                     connection closes (its time then goes into `bytes_ended`)
  /chunked/N         200 with N bytes, chunked (no length announced)
  /slow/N            200, chunked: N bytes, then a pause of `slow_pause` seconds, then N more
  /protected         200, or 401 when the bearer token is in `refused_tokens`
  /link/N            201 with a `Link` header of N bytes; with `?large`, a body of 300 000 bytes;
                     with `?stall`, that length announced, then nothing until the connection
                     closes (its time then goes into `bytes_ended`)
  /spaced            200 with `X-RateLimit-Limit : 5` (a space before the colon)
  anything else      200 {"path": …}
"""
from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RecordingUpstream:
    """With `tls` (a server SSLContext), it speaks HTTPS as `localhost`. `connections` counts the
    connections it accepted, `resumed` those whose TLS session was resumed (no full handshake)."""

    def __init__(self, host: str = "127.0.0.1", tls: ssl.SSLContext | None = None):
        upstream = self
        self.requests: list[dict] = []
        self.refused_tokens: set[str] = set()
        self.slow_pause = 1.5
        self.bytes_ended: list[float] = []
        self.connections = 0
        self.resumed = 0
        self._gate = 0
        self._gated = 0
        self._lock = threading.Lock()
        self._gate_open = threading.Condition(self._lock)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                self.first = True
                with upstream._lock:
                    upstream.connections += 1

            def _record(self):
                if self.first:  # its TLS handshake, if any, is done now
                    self.first = False
                    with upstream._lock:
                        upstream.resumed += 1 if getattr(self.connection, "session_reused", False) else 0
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
                elif path == "/hop":
                    self._send(200, b'{"ok": true}', [
                        ("Content-Type", "application/json"), ("ETag", '"v1"'), ("X-RateLimit-Remaining", "4999"),
                        ("Connection", "X-RateLimit-Remaining"),
                    ])
                elif path == "/redirect":
                    self._send(302, b"", [("Location", f"http://{self.headers['Host']}/elsewhere"), ("Set-Cookie", "upstream=1")])
                elif path.startswith("/bytes/") or path.startswith("/gate/"):
                    if path.startswith("/gate/"):
                        with upstream._gate_open:
                            upstream._gated += 1
                            upstream._gate_open.notify_all()
                            upstream._gate_open.wait_for(lambda: upstream._gated >= upstream._gate, timeout=10)
                    size = int(path.rsplit("/", 1)[1])
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    if self.path.endswith("?stall"):
                        self.wfile.flush()
                        upstream._wait_for_close(self.connection)
                        return
                    sent = 0
                    try:
                        while sent < size:
                            chunk = min(65536, size - sent)
                            self.wfile.write(b"a" * chunk)
                            sent += chunk
                    except OSError:
                        pass
                    with upstream._lock:
                        upstream.bytes_ended.append(time.monotonic())
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
                elif path.startswith("/link/"):
                    size = int(path.rsplit("/", 1)[1])
                    link = ("Link", "<" + "a" * (size - 2) + ">")
                    if self.path.endswith("?stall"):
                        self.send_response(201)
                        self.send_header(*link)
                        self.send_header("Content-Length", "300000")
                        self.end_headers()
                        self.wfile.flush()
                        upstream._wait_for_close(self.connection)
                    else:
                        body = b"a" * 300000 if self.path.endswith("?large") else b"{}"
                        self._send(201, body, [("Content-Type", "application/json"), link])
                elif path == "/spaced":
                    self._send(200, b"{}", [("Content-Type", "application/json"), ("X-RateLimit-Limit ", "5")])
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
        if tls is not None:
            # The handshake happens in the handler's thread, not in accept(): a slow client holds up no one.
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True, do_handshake_on_connect=False)
        self.base_url = f"https://localhost:{self.port}" if tls is not None else f"http://{host}:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _wait_for_close(self, connection):
        """Reads nothing but the connection's end (30 s at most), then notes its time in `bytes_ended`."""
        connection.settimeout(30)
        try:
            while connection.recv(4096):
                pass
        except OSError:
            pass
        with self._lock:
            self.bytes_ended.append(time.monotonic())

    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def hold_gate(self, requests: int):
        """/gate/N answers from now on once `requests` of them have arrived."""
        with self._lock:
            self._gate, self._gated = requests, 0

    def last(self) -> dict:
        with self._lock:
            return self.requests[-1]

    def close(self):
        self._server.shutdown()
        self._server.server_close()


class MisbehavingUpstream:
    """An API upstream on loopback, on raw sockets, that keeps connections alive and answers by
    path, misbehaving on some:

      /no-content      204, and then (a moment later, so that it is not read with the head) a
                       whole second answer as if it were a body
      /not-modified    304, likewise
      /extra           200 with Content-Length: 2, then, likewise, a second answer
      /extra-now       the same, the second answer in the same segment as the first
      /extra-split     the head, then (a moment later) the body's 2 bytes and the second answer in
                       one segment: over TLS, one record, which TLS decrypts whole
      /trailer         401 (an answer the proxy holds whole), chunked, with trailer fields
                       (Location, WWW-Authenticate) after the body
      any HEAD         200 with Content-Length, then the announced body (the second answer)
      /switch          101 Switching Protocols, then silence (the connection stays open)
      /huge-headers    200 with 400 KB of headers, more than any client reads
      /two-lengths     200 with Content-Length: 5 and Content-Length: 6, and 6 bytes
      /same-lengths    200 with Content-Length: 2 twice, and 2 bytes
      anything else    200 {"path": …, "auth": <the Authorization header>}

    The second answer carries the path and Authorization of the request that provoked it: read
    by another request, it would hand that request someone else's answer.

    With a TLS `context` it serves HTTPS, offering HTTP/2 as well as HTTP/1.1 by ALPN (which
    protocol each connection's client chose is in `protocols`), and speaking HTTP/1.1.
    """

    def __init__(self, host: str = "127.0.0.1", delay: float = 0.3, context: ssl.SSLContext | None = None):
        self.delay = delay
        self.context = context
        if context is not None:
            context.set_alpn_protocols(["h2", "http/1.1"])
        self.protocols: list[str | None] = []
        self.requests: list[tuple[str, str]] = []
        # Second answers sent after a first (the smuggled bytes are on their way).
        self.smuggled = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"{'https' if context else 'http'}://{host}:{self.port}"
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @staticmethod
    def answer(status: str, body: bytes) -> bytes:
        return f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body

    def _accept(self):
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._open.append(connection)
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket):
        buffered = b""
        try:
            if self.context is not None:
                connection = self.context.wrap_socket(connection, server_side=True)
                self.protocols.append(connection.selected_alpn_protocol())
            while True:
                while b"\r\n\r\n" not in buffered:
                    chunk = connection.recv(65536)
                    if not chunk:
                        return
                    buffered += chunk
                head, buffered = buffered.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
                length = int(headers.get("content-length") or 0)
                while len(buffered) < length:
                    buffered += connection.recv(65536)
                buffered = buffered[length:]
                self.requests.append((method, target))
                own = json.dumps({"path": target, "auth": headers.get("authorization", "")}).encode()
                smuggled = self.answer("200 OK", json.dumps({"smuggled": target, "auth": headers.get("authorization", "")}).encode())
                if method == "HEAD":
                    connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {len(smuggled)}\r\n\r\n".encode())
                    time.sleep(self.delay)
                    connection.sendall(smuggled)
                elif target == "/no-content" or target == "/not-modified":
                    connection.sendall(b"HTTP/1.1 204 No Content\r\n\r\n" if target == "/no-content" else b"HTTP/1.1 304 Not Modified\r\n\r\n")
                    time.sleep(self.delay)
                    connection.sendall(smuggled)
                elif target == "/extra":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    time.sleep(self.delay)
                    connection.sendall(smuggled)
                    self.smuggled += 1
                elif target == "/extra-now":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + smuggled)
                    self.smuggled += 1
                elif target == "/extra-split":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
                    time.sleep(self.delay)
                    connection.sendall(b"ok" + smuggled)
                    self.smuggled += 1
                elif target == "/trailer":
                    connection.sendall(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                                       b"WWW-Authenticate: Bearer realm=\"api\"\r\nTrailer: Location\r\n\r\n"
                                       b"2\r\nok\r\n0\r\nLocation: https://elsewhere.example/\r\n"
                                       b"WWW-Authenticate: Bearer error=\"from-a-trailer\"\r\n\r\n")
                elif target == "/switch":
                    connection.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n")
                elif target == "/two-lengths":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!")
                elif target == "/same-lengths":
                    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2, 2\r\n\r\nok")
                elif target == "/huge-headers":
                    filler = "".join(f"X-Filler-{n}: {'v' * 100}\r\n" for n in range(4000))
                    connection.sendall(f"HTTP/1.1 200 OK\r\n{filler}Content-Length: 2\r\n\r\nok".encode())
                else:
                    connection.sendall(self.answer("200 OK", own))
        except OSError:
            return

    def close(self):
        self._listener.close()
        for connection in self._open:
            try:
                connection.close()
            except OSError:
                pass
