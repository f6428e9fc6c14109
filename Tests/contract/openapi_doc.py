"""openapi.yaml as the contract tests (test_openapi.py, test_openapi_bodies.py) read it: what the
document must list and answer (SPEC.md's endpoints and those beyond it, the error codes and their
statuses, the shared error responses), and helpers that load, resolve and walk the document."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterator
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker

ROOT = Path(__file__).resolve().parents[2]
OPENAPI_PATH = ROOT / "openapi.yaml"
# SPEC.md lives in shared/, beside the repository (CI clones main with shared/ next to it).
SPEC_MD_CANDIDATES = [ROOT.parent / "shared" / "SPEC.md", ROOT / "SPEC.md"]

HTTP_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}

# The HTTP API table of SPEC.md, endpoint by endpoint.
SPEC_ENDPOINTS = [
    ("get", "/authorize"),
    ("post", "/authorize"),
    ("get", "/callback"),
    ("post", "/token"),
    ("get", "/token"),
    ("post", "/refresh"),
    ("post", "/revoke"),
    ("get", "/profile"),
    ("get", "/session"),
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
]

# Beyond SPEC.md's table: the standard OAuth endpoints of each provider's issuer (the issue
# "Speak standard OAuth to apps"), documented once with `{provider}` in the path.
STANDARD_ENDPOINTS = [
    ("get", "/.well-known/oauth-authorization-server/providers/{provider}"),
    ("get", "/providers/{provider}/authorize"),
    ("post", "/providers/{provider}/token"),
    ("post", "/providers/{provider}/revoke"),
    ("post", "/providers/{provider}/device_authorization"),
]

# The public keys of the broker's private_key_jwt client assertions, per provider (the issue
# "enterprise sign-out and client authentication").
CLIENT_KEY_ENDPOINTS = [("get", "/providers/{provider}/client-jwks")]

# The device flow (RFC 8628): codes for a device, and the pages where its user types the code.
DEVICE_ENDPOINTS = [
    ("post", "/device/authorize"),
    ("get", "/device"),
    ("post", "/device"),
    ("get", "/device/decision"),
    ("post", "/device/decision"),
    ("get", "/device/refused"),
    ("get", "/device/confirm"),
    ("post", "/device/confirm"),
]

# The API proxy: one path, documented once per method (HEAD is accepted wherever GET is).
PROXY_ENDPOINTS = [(method, "/proxy/{provider}/{path}") for method in ("get", "post", "put", "patch", "delete")]

LOGOUT_ENDPOINTS = [("post", "/providers/{provider}/backchannel_logout")]

# Token introspection (RFC 7662) for the resource servers configured (none: a 401 for everyone): a
# client that authenticates, so its 401 is HTTP Basic's `invalid_client`.
INTROSPECTION_ENDPOINTS = [("post", "/introspect")]

# The admin API (off unless configured): its own bearer token, its own 401.
ADMIN_ENDPOINTS = [("get", "/admin/sessions"), ("post", "/admin/sessions/end"), ("post", "/admin/subjects/end")]

# Pages for a person at a browser: their own errors are HTML (with a JSON alternative where the
# server answers before the page's code runs).
HTML_PAGES = {("post", "/device"), ("post", "/device/decision"), ("post", "/device/confirm")}
# The question of the account that signed in, which a reload asks again (not rate-limited: it
# changes nothing).
HTML_READ_PAGES = {("get", "/device/confirm")}
# The question for a code found, which a reload asks again: bound to its browser (no 403, no 429).
HTML_QUESTION_PAGES = {("get", "/device/decision")}

# Operations that take the session token as a bearer credential.
BEARER_ENDPOINTS = {
    ("post", "/authorize"),
    ("get", "/token"),
    ("post", "/refresh"),
    ("post", "/revoke"),
    ("get", "/profile"),
    ("get", "/session"),
} | set(PROXY_ENDPOINTS)

ALLOWED_TAGS = {"oauth", "session", "operations", "admin"}

# Every error code, with the one status it is sent with.
CODE_STATUS = {
    "invalid_request": "400",
    "unauthorized_client": "400",
    "unsupported_grant_type": "400",
    "invalid_grant": "400",
    "invalid_scope": "400",
    "authorization_pending": "400",
    "slow_down": "400",
    "access_denied": "400",
    "expired_token": "400",
    "invalid_client": "401",
    "invalid_token": "401",
    "login_required": "401",
    # A token endpoint refuses a bad DPoP proof with 400 (RFC 9449 §5), a protected resource with 401 (§7.1).
    "invalid_dpop_proof": ("400", "401"),
    "use_dpop_nonce": ("400", "401"),
    "token_refreshed": "401",
    "forbidden": "403",
    "wrong_provider": "403",
    "not_found": "404",
    "method_not_allowed": "405",
    "provider_token_bound": "409",
    "payload_too_large": "413",
    "uri_too_long": "414",
    "unsupported_media_type": "415",
    "rate_limited": "429",
    "header_too_large": "431",
    "server_error": "500",
    "upstream_error": "502",
    "upstream_address_refused": "502",
    "upstream_response_too_large": "502",
    "upstream_unavailable": "503",
    "proxy_busy": "503",
    "temporarily_unavailable": "503",
}

# Codes any operation may answer, explained once in info.description rather than per operation.
GENERIC_CODES = {
    "method_not_allowed",
    "payload_too_large",
    "uri_too_long",
    "header_too_large",
    "rate_limited",
    "server_error",
    "temporarily_unavailable",
}

# Statuses and codes every operation answers, whatever its path: the body, URL and header limits
# are checked before routing, and shutdown / the connection limits apply to every request.
EVERY_OPERATION_CODES = {
    "405": "method_not_allowed",
    "413": "payload_too_large",
    "414": "uri_too_long",
    "431": "header_too_large",
    "500": "server_error",
    "503": "temporarily_unavailable",
}

# Media types every form body accepts: the form, or a JSON object whose values are all strings.
FORM_MEDIA_TYPES = {"application/x-www-form-urlencoded", "application/json"}

# Common error statuses that must come from components/responses.
SHARED_ERROR_RESPONSES = {
    "400": "BadRequest",
    "401": "Unauthorized",
    "404": "NotFound",
    "405": "MethodNotAllowed",
    "413": "PayloadTooLarge",
    "414": "UriTooLong",
    "415": "UnsupportedMediaType",
    "429": "TooManyRequests",
    "431": "HeaderTooLarge",
    "500": "InternalServerError",
    "502": "BadGateway",
    "503": "ServiceUnavailable",
}

# Error responses that deliberately are not the shared component.
OWN_ERROR_RESPONSES = {("get", "/callback", "400"), ("get", "/callback", "403"), ("get", "/readyz", "503"),
                       ("get", "/authorize", "400"), ("get", "/providers/{provider}/authorize", "400"),
                       ("post", "/providers/{provider}/token", "401"), ("post", "/providers/{provider}/revoke", "401"),
                       ("post", "/providers/{provider}/device_authorization", "401"), ("post", "/introspect", "401")} | {
    (method, path, "401") for method, path in ADMIN_ENDPOINTS} | {
    (method, path, status) for method, path in HTML_PAGES for status in ("400", "403", "429", "503")} | {
    (method, path, status) for method, path in HTML_READ_PAGES for status in ("400", "403", "503")} | {
    (method, path, status) for method, path in HTML_QUESTION_PAGES for status in ("400", "503")}

# Errors only ever answered as a page (the provider's refusal to start a device's sign-in): no
# JSON body, as none of the server's own limits answers with that status.
HTML_ONLY_ERROR_RESPONSES = {("post", "/device/decision", "502")}
OWN_ERROR_RESPONSES |= HTML_ONLY_ERROR_RESPONSES

ERROR_REF = "#/components/schemas/Error"
READINESS_REF = "#/components/schemas/Readiness"
TOKEN_PROPERTIES = {"access_token", "session_token"}


# --- helpers ---------------------------------------------------------------------------------


def load_doc() -> dict[str, Any]:
    with OPENAPI_PATH.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def resolve(doc: dict[str, Any], node: Any) -> Any:
    """Follows local $ref chains ("#/a/b") to the node they name."""
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), f"only local references are used: {ref}"
        assert ref not in seen, f"reference cycle at {ref}"
        seen.add(ref)
        target: Any = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            assert isinstance(target, dict) and part in target, f"dangling reference {ref}"
            target = target[part]
        node = target
    return node


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method in HTTP_METHODS:
                yield method, path, op


def responses(doc: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any], dict[str, Any]]]:
    """(method, path, status, raw response, resolved response) for every response."""
    for method, path, op in operations(doc):
        for status, raw in op["responses"].items():
            yield method, path, str(status), raw, resolve(doc, raw)


def schema_properties(doc: dict[str, Any], schema: Any) -> dict[str, Any]:
    """Properties of an object schema, through $ref and allOf."""
    schema = resolve(doc, schema)
    props = dict(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        props.update(schema_properties(doc, part))
    return props


def walk(node: Any, pointer: str = "#") -> Iterator[tuple[str, Any]]:
    yield pointer, node
    if isinstance(node, dict):
        for key, value in node.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            yield from walk(value, f"{pointer}/{escaped}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{pointer}/{index}")


def schema_validator(doc: dict[str, Any], pointer: str) -> OAS30Validator:
    """A validator for the schema at `pointer`, resolving its references against the document."""
    root = dict(doc)
    root["$ref"] = pointer  # Draft 4 semantics: $ref replaces its siblings.
    return OAS30Validator(root, format_checker=oas30_format_checker)


OPS = [(m, p) for m, p, _ in operations(load_doc())]
OP_IDS = [f"{m.upper()} {p}" for m, p in OPS]


def op_of(doc: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return doc["paths"][path][method]
