"""A backend as its authors would write it: a Flask API whose routes are protected by authlib's
RFC 7662 token validator, which asks the broker's POST /introspect about each bearer token with
the backend's own credentials (HTTP Basic). Runs on a loopback port in a thread."""
from __future__ import annotations

import threading

import requests
from authlib.integrations.flask_oauth2 import ResourceProtector, current_token
from authlib.oauth2.rfc7662 import IntrospectTokenValidator
from flask import Flask, jsonify
from werkzeug.serving import make_server


class ResourceServer:
    def __init__(self, introspection_endpoint: str, client_id: str, client_secret: str):
        class BrokerIntrospection(IntrospectTokenValidator):
            def introspect_token(self, token_string):
                answer = requests.post(introspection_endpoint, data={"token": token_string, "token_type_hint": "access_token"},
                                       auth=(client_id, client_secret), timeout=10)
                answer.raise_for_status()
                return answer.json()

        protect = ResourceProtector()
        protect.register_token_validator(BrokerIntrospection())
        app = Flask("orders")

        @app.route("/orders")
        @protect()
        def orders():
            return jsonify(user=current_token["sub"], provider=current_token["provider"], app=current_token["client_id"])

        @app.route("/admin")
        @protect("admin")
        def admin():
            return jsonify(ok=True)

        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def get(self, path: str, token: str) -> requests.Response:
        return requests.get(self.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=15)

    def close(self):
        self._server.shutdown()
