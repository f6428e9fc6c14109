"""A misbehaving provider endpoint on loopback: it closes connections without answering, never
answers, answers garbage, or answers enormously. Used to check that every broker endpoint fails
fast and cleanly (a bounded 502/503) and keeps its sessions."""
from __future__ import annotations

import socket
import threading


class FaultServer:
    MODES = ("close", "hang", "html", "broken_json", "huge", "status_500")

    def __init__(self, mode: str = "close"):
        self.mode = mode
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.requests = 0
        self._held = []
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self.requests += 1
            threading.Thread(target=self._answer, args=(client,), daemon=True).start()

    def _answer(self, client: socket.socket):
        try:
            client.settimeout(5)
            client.recv(65536)
            if self.mode == "close":
                client.close()
                return
            if self.mode == "hang":
                self._held.append(client)
                return
            body, status, kind = {
                "html": (b"<html><body>Service temporarily down</body></html>", 200, "text/html"),
                "broken_json": (b'{"access_token": "x", ', 200, "application/json"),
                "huge": (b'{"pad":"' + b"a" * (3 << 20) + b'"}', 200, "application/json"),
                "status_500": (b'{"message":"internal"}', 500, "application/json"),
            }[self.mode]
            head = f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            client.sendall(head.encode() + body)
            client.close()
        except OSError:
            pass

    def stop(self):
        self._stop.set()
        self._listener.close()
        for client in self._held:
            client.close()


def closed_port() -> int:
    """A loopback port nothing listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
