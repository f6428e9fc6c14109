"""In-process mutable state of the test server: request counters, token lifetime, faults.

The server runs as ONE process (runserver --noreload, threaded), so module globals guarded by a
lock are shared by every request thread.
"""

import threading
from collections import Counter

from django.conf import settings

_lock = threading.Lock()
# Held around every request that creates or kills tokens (token, revoke, introspect, and the
# /test/ mutations). DOT relies on SELECT ... FOR UPDATE, which SQLite does not have: two racing
# refreshes of one token then intermittently end in a 500 (AccessToken.DoesNotExist). Serialised,
# the first refresh wins and every later use of the same refresh token is a reuse (invalid_grant,
# and reuse protection revokes the whole token family) -- strict, deterministic rotation.
token_lock = threading.RLock()
SERIALISED_ENDPOINTS = {"token", "revoke", "introspect"}
_grant_counts: Counter = Counter()  # token endpoint: grant_type -> requests
_traces: list = []  # the trace headers of requests that carried any: endpoint, traceparent, x_request_id
_endpoint_counts: Counter = Counter()  # endpoint name -> requests
_config = {}
_faults = {}  # endpoint name -> fault dict (see set_fault)

# The Django request being handled by this thread (set by the middleware), for validator hooks
# that oauthlib calls without it.
current = threading.local()

# Endpoint names used by the counters and by fault injection.
ENDPOINTS = {
    "/o/authorize/": "authorize",
    "/o/token/": "token",
    "/o/revoke_token/": "revoke",
    "/o/introspect/": "introspect",
    "/o/userinfo/": "userinfo",
    "/o/.well-known/jwks.json": "jwks",
    "/o/.well-known/openid-configuration": "discovery",
    "/o/.well-known/openid-configuration/": "discovery",
    "/o/.well-known/oauth-authorization-server": "metadata",
    "/accounts/login/": "login",
}


def _defaults():
    return {"access_token_lifetime": settings.ACCESS_TOKEN_LIFETIME}



def count(endpoint, grant_type=None):
    with _lock:
        _endpoint_counts[endpoint] += 1
        if endpoint == "token":
            _grant_counts[grant_type or "<missing>"] += 1


def record_trace(endpoint, traceparent, request_id):
    with _lock:
        _traces.append({"endpoint": endpoint, "traceparent": traceparent, "x_request_id": request_id})


def traces():
    with _lock:
        return list(_traces)


def grant_counts():
    with _lock:
        return dict(_grant_counts)


def endpoint_counts():
    with _lock:
        return dict(_endpoint_counts)


def reset_counts():
    with _lock:
        _grant_counts.clear()
        _endpoint_counts.clear()
        _traces.clear()


def access_token_lifetime():
    with _lock:
        return int(_config.get("access_token_lifetime", settings.ACCESS_TOKEN_LIFETIME))


def get_config():
    with _lock:
        cfg = _defaults()
        cfg.update(_config)
        cfg["faults"] = {k: dict(v) for k, v in _faults.items()}
        return cfg


def update_config(data):
    """Apply a partial config: {"access_token_lifetime": int, "faults": {endpoint: fault|null}}."""
    with _lock:
        if "access_token_lifetime" in data:
            value = data["access_token_lifetime"]
            if value is None:
                _config.pop("access_token_lifetime", None)
            else:
                value = int(value)
                if value <= 0:
                    raise ValueError("access_token_lifetime must be a positive number of seconds")
                _config["access_token_lifetime"] = value
        for endpoint, fault in (data.get("faults") or {}).items():
            if endpoint not in set(ENDPOINTS.values()):
                raise ValueError(f"unknown endpoint {endpoint!r}; one of {sorted(set(ENDPOINTS.values()))}")
            if fault is None:
                _faults.pop(endpoint, None)
                continue
            f = {
                "status": fault.get("status"),
                "body": fault.get("body", ""),
                "content_type": fault.get("content_type", "application/json"),
                "delay": float(fault.get("delay", 0) or 0),
                "count": fault.get("count", 1),  # None: until cleared
            }
            if f["status"] is not None:
                f["status"] = int(f["status"])
            _faults[endpoint] = f


def reset_config():
    with _lock:
        _config.clear()
        _faults.clear()


def take_fault(endpoint):
    """The fault to apply to this request (consuming one of its `count`), or None."""
    with _lock:
        f = _faults.get(endpoint)
        if not f:
            return None
        if f["count"] is not None:
            f["count"] -= 1
            if f["count"] <= 0:
                del _faults[endpoint]
        return dict(f)
