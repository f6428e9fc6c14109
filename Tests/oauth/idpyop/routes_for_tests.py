"""The /test/... routes of the tests' OpenID Provider (server.py's Handler): create users, end a
user's sessions at the OP, read and reset what the OP saw, change the DPoP nonce, and read a
registered client.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs


class RoutesForTests:
    """Handler's test API: it uses the handler's `provider`, `command`, `_body` and `_send`."""

    def _test_api(self, path: str, query: str):
        provider = self.provider
        if path == "/test/users" and self.command == "POST":
            with provider.lock:
                return self._send(200, provider.add_user(json.loads(self._body())))
        if path == "/test/end_sessions" and self.command == "POST":
            username = json.loads(self._body())["username"]
            with provider.lock:
                result = provider.end_user_sessions(username)
            return self._send(200, result)
        if path == "/test/seen":
            with provider.lock:
                return self._send(200, provider.seen)
        if path == "/test/seen/reset" and self.command == "POST":
            with provider.lock:
                for entries in provider.seen.values():
                    entries.clear()
            return self._send(200, {})
        if path == "/test/dpop/rotate_nonce" and self.command == "POST":
            if provider.dpop is None:
                return self._send(404, {"error": "DPoP is off"})
            with provider.lock:
                return self._send(200, {"nonce": provider.dpop.rotate_nonce()})
        if path == "/test/clients":
            client_id = parse_qs(query).get("client_id", [""])[0]
            client = provider.context.cdb.get(client_id)
            if client is None:
                return self._send(404, {"error": "unknown client"})
            return self._send(200, {k: v for k, v in client.items() if k != "client_secret"})
        self._send(404, {"error": "not_found"})
