"""An OpenID Provider for the tests: idpyoidc's `Server` (PyPI `idpyoidc`) behind Python's own HTTP server.

idpyoidc is a library, not a program: it parses, authenticates and answers each endpoint's
requests but leaves the HTTP to its caller (its repository's example/flask_op does that with
Flask). This file is that caller, shaped after example/flask_op/views.py, with the standard
library's threaded HTTP server instead of Flask. Every OAuth decision (client authentication,
PKCE, PAR, codes, tokens, refresh, revocation, ID tokens, sessions, logout tokens) is
idpyoidc's; what this file and the modules beside it (op_provider.py: idpyoidc's Server and its
configuration; dpop_handler.py; routes_for_tests.py) add is stated where it is done:

- discovery also lists `authorization_response_iss_parameter_supported` (idpyoidc always puts
  `iss` in the authorization response, RFC 9207, but does not say so) and, when started with
  `require_par`, `require_pushed_authorization_requests`; and `backchannel_logout_session_supported`,
  Back-Channel Logout 1.0's name for what idpyoidc lists as `backchannel_logout_session_required`;
  it leaves out `end_session_endpoint` (RP-initiated logout is not served: sessions end through
  /test/end_sessions) (op_provider.py);
- a front-channel authorization request without a pushed `request_uri` is refused for a client
  registered with `require_pushed_authorization_requests`, or for every client under
  `require_par` (RFC 9126 §5/§6; idpyoidc 5 accepts PAR but does not enforce it) (here);
- a client's registered `token_endpoint_auth_method` is the only method its token, revocation
  and PAR calls may use (idpyoidc enforces a per-client method list; registration does not fill
  it in) (op_provider.py, on each registration here);
- `assertion_audience` chooses which `aud` a client assertion must carry: "endpoint" (idpyoidc's
  own rule: the URL of the endpoint called), "issuer" (the issuer identifier only), or "both"
  (op_provider.py);
- a revoked or expired refresh token is answered `invalid_grant` (RFC 6749 §5.2), where idpyoidc 5
  says `invalid_request` (op_provider.py);
- when started with `dpop`, DPoP (RFC 9449), with the checks of dpop_checks.py: idpyoidc 5 mints
  DPoP-bound tokens (`token_type` DPoP, `cnf.jkt` in the JWT access token) once its DPoP context
  is set and the parsed token request carries `dpop_jkt`, but its add-on does not check proofs
  where they are sent (it hooks only userinfo, with a hex `ath`, and has no nonces). So discovery
  lists `dpop_signing_alg_values_supported` ["ES256"], idpyoidc's DPoP context is set without
  the add-on's hook, and a `DPoP` proof is checked here before idpyoidc parses the request:
  at /par, /token and /revoke (400 `invalid_dpop_proof` or `use_dpop_nonce`), where a good
  proof at /token hands its key's thumbprint to idpyoidc as `dpop_jkt` (a hook on the token
  endpoint), with `dpop_required` a token request needs one, and a refresh of a DPoP-bound grant
  needs one made with the same key (§5's rule for public clients, applied to every client);
  at /userinfo with `Authorization: DPoP` (401 with `WWW-Authenticate: DPoP error=...`; a
  DPoP-bound token sent as Bearer is `invalid_token`); with `dpop_nonce`, the OP's nonce is
  required in every proof and sent as `DPoP-Nonce` in every answer of those endpoints (§8, §9)
  (idpyoidc's DPoP context and the token endpoint's hook: op_provider.py; the checks where a
  proof is sent: dpop_handler.py);
- when started with `dpop`, a DPoP-protected API, any GET or POST under /api/ (idpyoidc has no
  resource server): it takes only a DPoP-bound access token of this OP with a proof of its key,
  and answers who called and how, so the tests can use a DPoP token as a resource server would
  (dpop_handler.py);
- /test/... routes for the tests: create users, end a user's sessions at the OP (which sends the
  back-channel logout tokens, through idpyoidc's own Session endpoint), read what the OP saw
  (pushed requests, authorization requests, verified client assertions, logout deliveries, DPoP
  checks), and change the OP's DPoP nonce (so a client must learn the new one)
  (routes_for_tests.py; what they read and do: op_provider.py).

Run: python server.py CONFIG.json  (written by Tests/oauth/support/idpy_op.py). It prints
"ready" on stdout once listening, and exits when its parent process dies.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import traceback
from http import cookies as http_cookies
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cryptojwt.utils import b64d
from idpyoidc.message.oauth2 import ResponseMessage
from idpyoidc.message.oidc import AccessTokenRequest, AuthorizationRequest, verified_claim_name
from idpyoidc.server.exception import FailedAuthentication
from idpyoidc.server.oidc.token import Token

# beside this file, which is run as a script
from dpop_handler import DPoPHandling
from op_provider import AUTHENTICATED_ENDPOINTS, Provider, standard_error
from routes_for_tests import RoutesForTests


class Handler(DPoPHandling, RoutesForTests, BaseHTTPRequestHandler):
    provider: Provider
    protocol_version = "HTTP/1.1"
    extra_headers = ()  # sent with whatever answers the current request (DPoP-Nonce); a list per request

    def log_message(self, fmt, *args):
        logging.getLogger("op.http").info("%s %s", self.address_string(), fmt % args)

    # ------------------------------------------------------------------ plumbing
    def _body(self) -> str:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length).decode() if length else ""

    def _send(self, status: int, body, content_type: str = "application/json", headers=(), cookies=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for name, value in [*headers, *self.extra_headers]:
            if name.lower() not in ("content-type", "content-length"):
                self.send_header(name, value)
        for cookie in cookies:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, error: ResponseMessage):
        # RFC 6749 §5.2 and RFC 6750 §3.1: a client or a token that does not authenticate is a 401.
        self._send(401 if error["error"] in ("invalid_client", "invalid_token") else 400, error.to_json())

    def _redirect(self, location: str, cookies=()):
        self._send(303, "", "text/plain", headers=[("Location", location)], cookies=cookies)

    def _http_info(self) -> dict:
        jar = http_cookies.SimpleCookie(self.headers.get("Cookie") or "")
        return {
            "headers": {k.lower(): v for k, v in self.headers.items() if k.lower() not in ("cookie", "user-agent")},
            "method": self.command,
            "url": f"http://{self.headers.get('Host', '')}{self.path}",
            "cookie": [{"name": k, "value": m.value} for k, m in jar.items()],
        }

    @staticmethod
    def _cookie_headers(info: dict) -> list[str]:
        specs = info.get("cookie") or []
        if isinstance(specs, dict):
            specs = [specs]
        out = []
        for spec in specs:
            morsel = http_cookies.SimpleCookie()
            morsel[spec["name"]] = spec["value"]
            m = morsel[spec["name"]]
            m["path"] = "/"
            m["samesite"] = "Lax"
            out.append(m.OutputString())
        return out

    # ------------------------------------------------------------------ routing
    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def _dispatch(self):
        self.extra_headers = []
        path, _, query = self.path.partition("?")
        prefix = urlsplit(self.provider.issuer).path
        if prefix and path.startswith(prefix):
            path = path[len(prefix):]
        try:
            if path == "/.well-known/openid-configuration":
                return self._send(200, self.provider.discovery())
            if path == "/jwks":
                return self._send(200, self.provider.context.keyjar.export_jwks())
            if path.startswith("/test/"):
                return self._test_api(path, query)
            with self.provider.lock:
                return self._oidc(path, query)
        except Exception:  # the tests read the OP's log
            logging.getLogger("op").error("unhandled: %s", traceback.format_exc())
            self._send(500, {"error": "server_error"})

    def _oidc(self, path: str, query: str):
        routes = {
            "/authorization": "authorization",
            "/par": "pushed_authorization",
            "/token": "token",
            "/revoke": "token_revocation",
            "/userinfo": "userinfo",
            "/registration": "registration",
        }
        if path in routes:
            return self._endpoint(self.provider.server.get_endpoint(routes[path]), query)
        if path == "/verify/user" and self.command == "POST":
            return self._verify_user()
        if path.startswith("/api/") and self.provider.dpop is not None:
            return self._dpop_api(query)
        self._send(404, {"error": "not_found"})

    def _endpoint(self, endpoint, query: str):
        http_info = self._http_info()
        if self.command == "GET":
            args = {k: v[0] for k, v in parse_qs(query, keep_blank_values=True).items()}
        else:
            body = self._body()
            ctype = self.headers.get("Content-Type", "")
            args = body if "json" in ctype else {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}
        if endpoint.name == "authorization" and isinstance(args, dict):
            refusal = self._front_channel_rule(args)
            self.provider.seen["authorization"].append({"params": sorted(args), "refused": bool(refusal)})
            if refusal:
                return self._send(400, refusal)
            args = self._with_pushed_parameters(args)
        if self.provider.dpop is not None and self._dpop_refused(endpoint, args, http_info):
            return None
        try:
            request = endpoint.parse_request(args, http_info=http_info)
        except Exception as err:
            logging.getLogger("op").info("%s: parse_request failed: %s", endpoint.name, err)
            status = 401 if endpoint.name in AUTHENTICATED_ENDPOINTS else 400
            error = "invalid_client" if status == 401 else "invalid_request"
            return self._send(status, {"error": error, "error_description": str(err)})
        if isinstance(request, ResponseMessage) and "error" in request:
            return self._send_error(standard_error(request))
        self._record_assertion(endpoint, request)
        try:
            if isinstance(endpoint, Token):
                result = endpoint.process_request(AccessTokenRequest(**request), http_info=http_info)
            else:
                result = endpoint.process_request(request, http_info=http_info)
        except Exception as err:
            logging.getLogger("op").info("%s: process_request failed: %s", endpoint.name, err)
            return self._send(400, {"error": "invalid_request", "error_description": str(err)})
        if isinstance(result, ResponseMessage) and "error" in result:
            return self._send_error(standard_error(result))
        if endpoint.name == "pushed_authorization" and "http_response" in result:
            self.provider.seen["pushed"].append(
                {"client_id": request.get("client_id"), "request_uri": result["http_response"]["request_uri"]}
            )
            return self._send(201, result["http_response"])
        if endpoint.name == "registration" and "response_args" in result:
            self.provider.enforce_registered_method(result["response_args"]["client_id"])
        if "redirect_location" in result:
            return self._redirect(result["redirect_location"])
        if "http_response" in result:
            return self._send(200, result["http_response"], "text/html; charset=utf-8")
        return self._respond(endpoint, request, result)

    def _respond(self, endpoint, request, result: dict):
        info = endpoint.do_response(request=request, **result)
        placement = info.get("response_placement", endpoint.response_placement)
        cookies = self._cookie_headers(info)
        if placement == "url":
            return self._redirect(info["response"], cookies=cookies)
        status = info.get("response_code", 201 if endpoint.name == "registration" else 200)
        ctype = dict(info.get("http_headers") or []).get("Content-type", "application/json")
        return self._send(status, info["response"], ctype, headers=info.get("http_headers") or [], cookies=cookies)

    def _front_channel_rule(self, args: dict):
        client_id = args.get("client_id", "")
        pushed = args.get("request_uri", "").startswith("urn:uuid:")
        if not pushed and self.provider.requires_par(client_id):
            return {"error": "invalid_request", "error_description": "pushed authorization request required"}
        return None

    def _with_pushed_parameters(self, args: dict) -> dict:
        # RFC 9126 §4: the authorization request names only client_id and request_uri. idpyoidc 5
        # checks the request's parameters (required ones, and rules such as offline_access
        # needing prompt=consent) before it replaces the request by the pushed one, so the pushed
        # parameters are copied in here; idpyoidc then uses the pushed request whole (and deletes
        # it: one use).
        pushed = self.provider.context.par_db.get(args.get("request_uri", ""))
        if pushed is None or pushed.get("client_id") != args.get("client_id"):
            return args
        copied = {k: " ".join(v) if isinstance(v, list) else v for k, v in pushed.to_dict().items()}
        return {**copied, **args}

    def _record_assertion(self, endpoint, request) -> None:
        if endpoint.name not in AUTHENTICATED_ENDPOINTS:
            return
        assertion = request.get(verified_claim_name("client_assertion"))
        method = "private_key_jwt" if assertion is not None else "other"
        entry = {"endpoint": endpoint.name, "client_id": request.get("client_id"), "method": method}
        if assertion is not None:
            entry["claims"] = dict(assertion)
            entry["header"] = json.loads(b64d(request["client_assertion"].split(".")[0].encode()))
        self.provider.seen["assertions"].append(entry)

    def _verify_user(self):
        form = {k: v[0] for k, v in parse_qs(self._body()).items()}
        method = self.provider.context.authn_broker.get_method_by_id("user")
        try:
            username = method.verify(**form)
        except FailedAuthentication:
            return self._send(403, "<p>Wrong username or password.</p>", "text/html")
        if not username:
            return self._send(403, "<p>Wrong username or password.</p>", "text/html")
        auth_args = method.unpack_token(form["token"])
        authz_request = AuthorizationRequest().from_urlencoded(auth_args["query"])
        endpoint = self.provider.server.get_endpoint("authorization")
        session_id = endpoint.create_session(
            authz_request, username, auth_args["authn_class_ref"], auth_args["iat"], method
        )
        result = endpoint.authz_part2(request=authz_request, session_id=session_id)
        if isinstance(result, ResponseMessage) and "error" in result:
            return self._send(400, result.to_json())
        return self._respond(endpoint, authz_request, result)


def watch_parent(parent_pid: int) -> None:
    while True:
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        time.sleep(1)


def main(config_path: str) -> None:
    cfg = json.loads(Path(config_path).read_text())
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    Handler.provider = Provider(cfg)
    httpd = ThreadingHTTPServer(("127.0.0.1", int(cfg["port"])), Handler)
    httpd.daemon_threads = True
    if cfg.get("parent_pid"):
        threading.Thread(target=watch_parent, args=(int(cfg["parent_pid"]),), daemon=True).start()
    print("ready", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
