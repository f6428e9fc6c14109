"""An OpenID Provider for the tests: idpyoidc's `Server` (PyPI `idpyoidc`) behind Python's own HTTP server.

idpyoidc is a library, not a program: it parses, authenticates and answers each endpoint's
requests but leaves the HTTP to its caller (its repository's example/flask_op does that with
Flask). This file is that caller, shaped after example/flask_op/views.py, with the standard
library's threaded HTTP server instead of Flask. Every OAuth decision (client authentication,
PKCE, PAR, codes, tokens, refresh, revocation, ID tokens, sessions, logout tokens) is
idpyoidc's; what this file adds is stated where it is done:

- discovery also lists `authorization_response_iss_parameter_supported` (idpyoidc always puts
  `iss` in the authorization response, RFC 9207, but does not say so) and, when started with
  `require_par`, `require_pushed_authorization_requests`; and `backchannel_logout_session_supported`,
  Back-Channel Logout 1.0's name for what idpyoidc lists as `backchannel_logout_session_required`;
  it leaves out `end_session_endpoint` (RP-initiated logout is not served: sessions end through
  /test/end_sessions);
- a front-channel authorization request without a pushed `request_uri` is refused for a client
  registered with `require_pushed_authorization_requests`, or for every client under
  `require_par` (RFC 9126 §5/§6; idpyoidc 5 accepts PAR but does not enforce it);
- a client's registered `token_endpoint_auth_method` is the only method its token, revocation
  and PAR calls may use (idpyoidc enforces a per-client method list; registration does not fill
  it in);
- `assertion_audience` chooses which `aud` a client assertion must carry: "endpoint" (idpyoidc's
  own rule: the URL of the endpoint called), "issuer" (the issuer identifier only), or "both";
- a revoked or expired refresh token is answered `invalid_grant` (RFC 6749 §5.2), where idpyoidc 5
  says `invalid_request`;
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
  required in every proof and sent as `DPoP-Nonce` in every answer of those endpoints (§8, §9);
- when started with `dpop`, a DPoP-protected API, any GET or POST under /api/ (idpyoidc has no
  resource server): it takes only a DPoP-bound access token of this OP with a proof of its key,
  and answers who called and how, so the tests can use a DPoP token as a resource server would;
- /test/... routes for the tests: create users, end a user's sessions at the OP (which sends the
  back-channel logout tokens, through idpyoidc's own Session endpoint), read what the OP saw
  (pushed requests, authorization requests, verified client assertions, logout deliveries, DPoP
  checks), and change the OP's DPoP nonce (so a client must learn the new one).

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
from urllib.parse import parse_qs, urlencode, urlsplit

from cryptojwt.utils import b64d
from idpyoidc.message.oauth2 import ResponseMessage
from idpyoidc.message.oidc import AccessTokenRequest, AuthorizationRequest, verified_claim_name
from idpyoidc.server import Server
from idpyoidc.server.configure import OPConfiguration
from idpyoidc.server.exception import FailedAuthentication
from idpyoidc.server.oauth2.add_on import dpop as dpop_add_on
from idpyoidc.server.oidc.token import Token

import dpop_checks  # beside this file, which is run as a script
from dpop_checks import DPoPChecker, DPoPError

HERE = Path(__file__).resolve().parent
AUTHENTICATED_ENDPOINTS = ("token", "token_revocation", "pushed_authorization")
# idpyoidc's endpoint name -> the name in seen["dpop"], for the endpoints that take a DPoP proof
DPOP_AS_ENDPOINTS = {"pushed_authorization": "par", "token": "token", "token_revocation": "revoke"}


def op_configuration(cfg: dict) -> dict:
    data = Path(cfg["data_dir"])
    authn_methods = ["private_key_jwt", "client_secret_basic", "client_secret_post"]
    return {
        "issuer": cfg["issuer"],
        "entity_id": cfg["issuer"],
        "httpc_params": {"verify": False, "timeout": 5},
        "keys": {
            "private_path": str(data / "op-keys.json"),
            "key_defs": [{"type": "RSA", "use": ["sig"]}, {"type": "EC", "crv": "P-256", "use": ["sig"]}],
            "read_only": False,
            "uri_path": "jwks",
        },
        "template_dir": str(HERE / "templates"),
        "add_on": {
            "pkce": {
                "function": "idpyoidc.server.oauth2.add_on.pkce.add_support",
                "kwargs": {"essential": True, "code_challenge_method": "S256"},
            }
        },
        "authz": {
            "class": "idpyoidc.server.authz.AuthzHandling",
            "kwargs": {
                "grant_config": {
                    "usage_rules": {
                        "authorization_code": {
                            "supports_minting": ["access_token", "refresh_token", "id_token"],
                            "max_usage": 1,
                        },
                        "access_token": {},
                        "refresh_token": {"supports_minting": ["access_token", "refresh_token", "id_token"]},
                    },
                    "expires_in": 43200,
                }
            },
        },
        "authentication": {
            "user": {
                "acr": "urn:oasis:names:tc:SAML:2.0:ac:classes:InternetProtocolPassword",
                "class": "idpyoidc.server.user_authn.user.UserPassJinja2",
                "kwargs": {
                    "verify_endpoint": "/verify/user",
                    "template": "user_pass.jinja2",
                    "db": {"class": "idpyoidc.server.util.JSONDictDB", "kwargs": {"filename": str(data / "passwd.json")}},
                },
            }
        },
        "userinfo": {"class": "idpyoidc.server.user_info.UserInfo", "kwargs": {"db_file": str(data / "users.json")}},
        "cookie_handler": {
            "class": "idpyoidc.server.cookie_handler.CookieHandler",
            "kwargs": {
                "keys": {
                    "private_path": str(data / "cookie-keys.json"),
                    "key_defs": [
                        {"type": "OCT", "use": ["enc"], "kid": "enc"},
                        {"type": "OCT", "use": ["sig"], "kid": "sig"},
                    ],
                    "read_only": False,
                },
                "name": {"session": "oidc_op", "register": "oidc_op_rp", "session_management": "sman"},
            },
        },
        "token_handler_args": {
            "jwks_def": {
                "private_path": str(data / "token-keys.json"),
                "read_only": False,
                "key_defs": [
                    {"type": "oct", "bytes": "24", "use": ["enc"], "kid": "code"},
                    {"type": "oct", "bytes": "24", "use": ["enc"], "kid": "refresh"},
                ],
            },
            "code": {"kwargs": {"lifetime": 600}},
            "token": {
                "class": "idpyoidc.server.token.jwt_token.JWTToken",
                "kwargs": {"lifetime": int(cfg.get("access_token_lifetime", 3600)), "add_claims_by_scope": True},
            },
            "refresh": {"kwargs": {"lifetime": 86400}},
            "id_token": {"class": "idpyoidc.server.token.id_token.IDToken", "kwargs": {}},
        },
        "preference": {
            "subject_types_supported": ["public"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "id_token_signing_alg_values_supported": ["RS256", "ES256"],
        },
        "endpoint": {
            "provider_config": {
                "path": ".well-known/openid-configuration",
                "class": "idpyoidc.server.oidc.provider_config.ProviderConfiguration",
                "kwargs": {"client_authn_method": None},
            },
            "registration": {
                "path": "registration",
                "class": "idpyoidc.server.oidc.registration.Registration",
                "kwargs": {"client_authn_method": None, "client_secret_expiration_time": 0},
            },
            "authorization": {
                "path": "authorization",
                "class": "idpyoidc.server.oidc.authorization.Authorization",
                "kwargs": {
                    "client_authn_method": None,
                    "claims_parameter_supported": True,
                    "request_parameter_supported": False,
                    "request_uri_parameter_supported": True,
                    "response_types_supported": ["code"],
                    "response_modes_supported": ["query"],
                },
            },
            "pushed_authorization": {
                "path": "par",
                "class": "idpyoidc.server.oauth2.pushed_authorization.PushedAuthorization",
                "kwargs": {"client_authn_method": authn_methods},
            },
            "token": {
                "path": "token",
                "class": "idpyoidc.server.oidc.token.Token",
                "kwargs": {"client_authn_method": authn_methods},
            },
            "token_revocation": {
                "path": "revoke",
                "class": "idpyoidc.server.oauth2.token_revocation.TokenRevocation",
                "kwargs": {"client_authn_method": authn_methods},
            },
            "userinfo": {"path": "userinfo", "class": "idpyoidc.server.oidc.userinfo.UserInfo", "kwargs": {}},
            "end_session": {
                "path": "session",
                "class": "idpyoidc.server.oidc.session.Session",
                "kwargs": {
                    "signing_alg": "ES256",
                    "frontchannel_logout_supported": False,
                    "backchannel_logout_supported": True,
                    "backchannel_logout_session_required": True,
                },
            },
        },
    }


def standard_error(error: ResponseMessage) -> ResponseMessage:
    """RFC 6749 §5.2: a revoked or expired refresh token is `invalid_grant`; idpyoidc 5 says
    `invalid_request` ("Refresh token inactive")."""
    if error.get("error_description") == "Refresh token inactive":
        error["error"] = "invalid_grant"
    return error


class Provider:
    """idpyoidc's Server plus the bookkeeping the tests read."""

    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.issuer = cfg["issuer"]
        self.data = Path(cfg["data_dir"])
        self.lock = threading.RLock()  # idpyoidc's in-memory databases are not meant for concurrent writers
        self.server = Server(OPConfiguration(conf=op_configuration(cfg), base_path=str(self.data)), cwd=str(self.data))
        self.context = self.server.context
        self._set_assertion_audience(cfg.get("assertion_audience", "endpoint"))
        self.seen: dict[str, list] = {"pushed": [], "authorization": [], "assertions": [], "logouts": [], "dpop": []}
        self._patch_logout_delivery()
        self.dpop: DPoPChecker | None = None
        if cfg.get("dpop"):
            self._add_dpop_support()

    def _set_assertion_audience(self, mode: str) -> None:
        # Endpoint.allowed_targets lists what a client assertion's `aud` may name: an endpoint's
        # name stands for its URL, "" for the issuer (idpyoidc's own convention, see userinfo).
        for name in AUTHENTICATED_ENDPOINTS:
            endpoint = self.server.get_endpoint(name)
            endpoint.allowed_targets = {"endpoint": [name], "issuer": [""], "both": [name, ""]}[mode]

    def _patch_logout_delivery(self) -> None:
        # Record each back-channel delivery's answer (idpyoidc only logs it) by wrapping the HTTP
        # client it sends with; the request itself is idpyoidc's.
        send = self.context.httpc

        def recording_httpc(method, url, **kwargs):
            response = send(method, url, **kwargs)
            data = kwargs.get("data") or ""
            if isinstance(data, str) and data.startswith("logout_token="):
                self.seen["logouts"].append(
                    {"url": url, "status": response.status_code, "logout_token": data[len("logout_token="):]}
                )
            return response

        self.context.httpc = recording_httpc

    def _add_dpop_support(self) -> None:
        # idpyoidc's own DPoP context (what its token helpers look for before they bind a token
        # to `dpop_jkt`; also its "DPoP" scheme for userinfo's Authorization header), without its
        # add_support(), whose only hook is the broken userinfo check: proofs are checked by the
        # handler, which puts a good proof's key thumbprint into http_info for the hook below.
        dpop_add_on._add_to_context(self.server.get_endpoint("userinfo"), dpop_checks.ALGS)
        # userinfo tries every method in turn and stops at the first usable one; "none" (always
        # usable, no token) comes before the add-on's "dpop", so "dpop" is moved next to Bearer.
        methods = self.context.client_authn_methods
        dpop_method = methods.pop("dpop")
        reordered = {}
        for name, method in methods.items():
            reordered[name] = method
            if name == "bearer_header":
                reordered["dpop"] = dpop_method
        self.context.client_authn_methods = reordered
        self.dpop = DPoPChecker(require_nonce=bool(self.cfg.get("dpop_nonce")))

        def bind_to_proof_key(request, client_id, context=None, http_info=None, **kwargs):
            jkt = (http_info or {}).get("dpop_jkt")
            if jkt and not (isinstance(request, ResponseMessage) and "error" in request):
                request["dpop_jkt"] = jkt
            return request

        self.server.get_endpoint("token").post_parse_request.append(bind_to_proof_key)

    def refresh_token_binding(self, refresh_token: str) -> str | None:
        """The key thumbprint the grant of `refresh_token` is bound to, if any."""
        try:
            info = self.context.session_manager.get_session_info_by_token(
                refresh_token, handler_key="refresh_token", grant=True
            )
        except Exception:  # not a refresh token of this OP: idpyoidc refuses it
            return None
        return info["grant"].extra.get("dpop_jkt")

    def record_dpop(self, endpoint: str, proofs: list, *, accepted: bool, error=None, grant_type=None, jkt=None) -> None:
        entry = {"endpoint": endpoint, **dpop_checks.peek(proofs[0] if len(proofs) == 1 else None)}
        if jkt:
            entry["jkt"] = jkt
        if endpoint == "token":
            entry["grant_type"] = grant_type
        entry.update(accepted=accepted, error=error)
        self.seen["dpop"].append(entry)

    def discovery(self) -> dict:
        info = dict(self.context.provider_info)
        info["authorization_response_iss_parameter_supported"] = True
        info["require_pushed_authorization_requests"] = bool(self.cfg.get("require_par"))
        # Back-Channel Logout 1.0 §2.1 names it so; idpyoidc 5 says "backchannel_logout_session_required".
        info["backchannel_logout_session_supported"] = info.get("backchannel_logout_session_required", False)
        info.pop("end_session_endpoint", None)  # RP-initiated logout is not served here
        return info

    def requires_par(self, client_id: str) -> bool:
        if self.cfg.get("require_par"):
            return True
        client = self.context.cdb.get(client_id) or {}
        return bool(client.get("require_pushed_authorization_requests"))

    def enforce_registered_method(self, client_id: str) -> None:
        client = self.context.cdb[client_id]
        method = client.get("token_endpoint_auth_method") or "client_secret_basic"
        for name in AUTHENTICATED_ENDPOINTS:
            endpoint_name = self.server.get_endpoint(name).endpoint_name
            client[f"{endpoint_name}_client_authn_method"] = [method]

    def add_user(self, user: dict) -> dict:
        """Adds a user to both of idpyoidc's user databases (the password one the login form
        checks, the claims one userinfo and ID tokens read); both keep their file in memory.
        The `sub` clients see is idpyoidc's public subject identifier (a hash of the username),
        not a claim given here."""
        claims = {
            "name": user.get("name") or user["username"],
            "email": user.get("email") or f"{user['username']}@example.test",
            "email_verified": bool(user.get("email_verified", True)),
        }
        self.context.authn_broker.get_method_by_id("user").user_db._db[user["username"]] = user["password"]
        self.context.userinfo.db[user["username"]] = claims
        return {"username": user["username"], **claims}

    def end_user_sessions(self, username: str) -> dict:
        """Ends every session of `username` at the OP, as an administrator would, through
        idpyoidc's Session endpoint: each client with a `backchannel_logout_uri` gets a logout token."""
        manager = self.context.session_manager
        session_endpoint = self.server.get_endpoint("session")
        before = len(self.seen["logouts"])
        ended = []
        user_session = manager.get([username]) if username in manager.db.db else None
        if user_session is None:
            return {"ended": [], "deliveries": []}
        for client_key in list(user_session.subordinate):
            client_path = manager.unpack_branch_key(client_key)
            client_session = manager.get(client_path)
            for grant_key in list(client_session.subordinate):
                grant = manager.get(manager.unpack_branch_key(grant_key))
                id_token = grant.last_issued_token_of_type("id_token")
                if grant.is_active() and id_token is not None:
                    session_endpoint.do_verified_logout(sid=id_token.session_id, alla=False)
                    ended.append({"client_id": client_path[-1]})
        return {"ended": ended, "deliveries": self.seen["logouts"][before:]}


class Handler(BaseHTTPRequestHandler):
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

    # ------------------------------------------------------------------ DPoP (RFC 9449)
    def _dpop_refused(self, endpoint, args, http_info: dict) -> bool:
        """Checks the DPoP proof of a request to /par, /token, /revoke or /userinfo before
        idpyoidc parses it; answers a refused one (and returns True). A good proof at /token
        leaves its key's thumbprint in http_info["dpop_jkt"]."""
        provider, dpop = self.provider, self.provider.dpop
        if endpoint.name == "userinfo":
            return self._dpop_userinfo_refused()
        name = DPOP_AS_ENDPOINTS.get(endpoint.name)
        if name is None:
            return False
        if dpop.require_nonce:
            self.extra_headers.append(("DPoP-Nonce", dpop.nonce))
        form = args if isinstance(args, dict) else {}
        grant_type = form.get("grant_type") if name == "token" else None
        bound = None
        if grant_type == "refresh_token" and form.get("refresh_token"):
            bound = provider.refresh_token_binding(form["refresh_token"])
        proofs = self.headers.get_all("DPoP") or []
        try:
            if not proofs:
                if name == "token" and provider.cfg.get("dpop_required"):
                    raise DPoPError("invalid_dpop_proof", "a DPoP proof is required at this token endpoint")
                if bound:
                    raise DPoPError("invalid_dpop_proof", "the grant is DPoP-bound: a refresh needs a proof of its key")
                return False
            proof = dpop.check(proofs, self.command, http_info["url"], bound_jkt=bound)
        except DPoPError as err:
            provider.record_dpop(name, proofs, accepted=False, error=err.error, grant_type=grant_type)
            self._send(400, {"error": err.error, "error_description": err.description})
            return True
        provider.record_dpop(name, proofs, accepted=True, grant_type=grant_type)
        if name == "token":
            http_info["dpop_jkt"] = proof.jkt
        return False

    def _dpop_userinfo_refused(self) -> bool:
        # `Authorization: DPoP`: checked as at the API, then idpyoidc answers (its "DPoP" scheme
        # takes the token like a bearer one). A DPoP-bound token sent as Bearer is refused.
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() == "dpop":
            return self._dpop_resource("userinfo", token.strip()) is None
        if scheme.lower() == "bearer":
            try:
                claims = dpop_checks.access_token_claims(
                    self.provider.context.keyjar, self.provider.issuer, token.strip())
            except DPoPError:
                return False  # not one of its JWTs: idpyoidc decides, as before
            jkt = (claims.get("cnf") or {}).get("jkt")
            if jkt:
                if self.provider.dpop.require_nonce:
                    self.extra_headers.append(("DPoP-Nonce", self.provider.dpop.nonce))
                error = DPoPError("invalid_token", "a DPoP-bound access token must be sent with the DPoP scheme")
                self.provider.record_dpop("userinfo", [], accepted=False, error=error.error, jkt=jkt)
                self._send_dpop_challenge(error)
                return True
        return False

    def _dpop_resource(self, name: str, token: str):
        """(token claims, Proof) of a request with `Authorization: DPoP <token>` at a protected
        resource, or None once its 401 is sent."""
        provider, dpop = self.provider, self.provider.dpop
        if dpop.require_nonce:
            self.extra_headers.append(("DPoP-Nonce", dpop.nonce))
        proofs = self.headers.get_all("DPoP") or []
        try:
            if not token:
                raise DPoPError("invalid_token", "a DPoP access token is required (Authorization: DPoP <token>)")
            claims = dpop_checks.access_token_claims(provider.context.keyjar, provider.issuer, token)
            jkt = (claims.get("cnf") or {}).get("jkt")
            if not jkt:
                raise DPoPError("invalid_token", "the access token is not DPoP-bound (no cnf.jkt)")
            url = f"http://{self.headers.get('Host', '')}{self.path}"
            proof = dpop.check(proofs, self.command, url, access_token=token, bound_jkt=jkt)
        except DPoPError as err:
            provider.record_dpop(name, proofs, accepted=False, error=err.error)
            self._send_dpop_challenge(err)
            return None
        provider.record_dpop(name, proofs, accepted=True)
        return claims, proof

    def _send_dpop_challenge(self, err: DPoPError) -> None:
        # RFC 9449 §7.1 / RFC 6750 §3: a 401 naming the DPoP scheme, the error and the algorithms.
        description = err.description.replace("\\", "").replace('"', "'")
        challenge = f'DPoP error="{err.error}", error_description="{description}", algs="{" ".join(dpop_checks.ALGS)}"'
        self._send(401, {"error": err.error, "error_description": err.description},
                   headers=[("WWW-Authenticate", challenge)])

    def _dpop_api(self, query: str):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if self.command == "POST" else b""
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        checked = self._dpop_resource("api", token.strip() if scheme.lower() == "dpop" else "")
        if checked is None:
            return None
        claims, proof = checked
        answer = {"sub": claims.get("sub"), "jkt": proof.jkt, "method": self.command,
                  "path": self.path.partition("?")[0], "query": query}
        if self.command == "POST":
            answer["body_length"] = len(body)
        return self._send(200, answer)

    # ------------------------------------------------------------------ test API
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
