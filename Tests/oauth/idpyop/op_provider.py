"""The tests' OpenID Provider (server.py): idpyoidc's `Server`, configured, with what server.py's
list says is added to it here — discovery's entries, a client held to its registered
authentication method, the `aud` a client assertion must carry, `invalid_grant` for an inactive
refresh token, idpyoidc's DPoP context and the token endpoint's hook that binds to a proof's key —
and the bookkeeping the tests read (users, sessions ended at the OP, what the OP saw).
"""

from __future__ import annotations

import threading
from pathlib import Path

from idpyoidc.message.oauth2 import ResponseMessage
from idpyoidc.server import Server
from idpyoidc.server.configure import OPConfiguration
from idpyoidc.server.oauth2.add_on import dpop as dpop_add_on

import dpop_checks  # beside server.py, which is run as a script
from dpop_checks import DPoPChecker

HERE = Path(__file__).resolve().parent
AUTHENTICATED_ENDPOINTS = ("token", "token_revocation", "pushed_authorization")


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
