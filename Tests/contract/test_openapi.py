"""Contract tests for openapi.yaml.

They check that the document is valid OpenAPI 3.0.3 and that it keeps the promises SPEC.md makes
about the HTTP API: every endpoint present, one shared Error schema, a WWW-Authenticate header on
every 401, Cache-Control on every response that carries a token, X-Request-Id and
X-Content-Type-Options everywhere, the errors every operation can answer (413/414/431 before
routing, 503 temporarily_unavailable), 415 and a JSON alternative on every form body, and the
parameter constraints of the PKCE flow.

Run: .venv/bin/python -m pytest -q Tests/contract
"""

from __future__ import annotations

import re
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator, oas30_format_checker
from openapi_spec_validator import validate

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
    ("post", "/device/decision"),
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
    "not_ready": "503",
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
    "not_ready",
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
    (method, path, status) for method, path in HTML_READ_PAGES for status in ("400", "403", "503")}

ERROR_REF = "#/components/schemas/Error"
READINESS_REF = "#/components/schemas/Readiness"
TOKEN_PROPERTIES = {"access_token", "session_token"}


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def doc() -> dict[str, Any]:
    with OPENAPI_PATH.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


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


# --- the document as a whole ------------------------------------------------------------------


def test_document_is_valid_openapi(doc):
    validate(doc)


def test_document_header(doc):
    assert doc["openapi"] == "3.0.3"
    info = doc["info"]
    assert info["title"] == "Token Broker"
    assert info["version"] == "1.0.0"
    description = info["description"]
    for phrase in ("session token", "tbs_", "client secret", "refresh token", "PKCE", "S256"):
        assert phrase in description, f"info.description should explain {phrase!r}"
    for phrase in (
        "Cache-Control: no-store",
        "X-Request-Id",
        "X-Content-Type-Options: nosniff",
        "application/json",
        "before routing",
        "Retry-After: 1",
        "Connection: close",
    ):
        assert phrase in description, f"info.description should state {phrase!r}"
    for code in GENERIC_CODES:
        assert f"`{code}`" in description, f"info.description should explain generic code `{code}`"
    assert [server["url"] for server in doc["servers"]] == ["http://127.0.0.1:8080"]
    assert {t["name"] for t in doc["tags"]} == ALLOWED_TAGS


def test_status_codes_are_strings():
    # Unquoted YAML status codes become integers; keep them quoted so tools agree.
    for method, path, op in operations(load_doc()):
        for status in op["responses"]:
            assert isinstance(status, str), f"{method.upper()} {path}: quote status {status}"


def test_every_pattern_compiles(doc):
    patterns = [node["pattern"] for _, node in walk(doc) if isinstance(node, dict) and "pattern" in node]
    assert patterns
    for pattern in patterns:
        re.compile(pattern)


def test_every_component_is_used(doc):
    text_refs = {node["$ref"] for _, node in walk(doc) if isinstance(node, dict) and "$ref" in node}
    for kind in ("schemas", "responses", "parameters", "headers"):
        for name in doc["components"].get(kind, {}):
            assert f"#/components/{kind}/{name}" in text_refs, f"unused component {kind}/{name}"


# --- endpoints -----------------------------------------------------------------------------


@pytest.mark.parametrize("method,path", SPEC_ENDPOINTS, ids=[f"{m.upper()} {p}" for m, p in SPEC_ENDPOINTS])
def test_spec_endpoint_is_documented(doc, method, path):
    assert path in doc["paths"], f"{path} missing"
    assert method in doc["paths"][path], f"{method.upper()} {path} missing"


def test_no_undocumented_extra_operations(doc):
    assert sorted((m, p) for m, p, _ in operations(doc)) == sorted(
        SPEC_ENDPOINTS + STANDARD_ENDPOINTS + CLIENT_KEY_ENDPOINTS + DEVICE_ENDPOINTS + PROXY_ENDPOINTS + LOGOUT_ENDPOINTS
        + ADMIN_ENDPOINTS + INTROSPECTION_ENDPOINTS)


def test_endpoint_list_matches_spec_md():
    spec_md = next((p for p in SPEC_MD_CANDIDATES if p.exists()), None)
    if spec_md is None:
        pytest.skip("SPEC.md not found beside the repository")
    in_table = set()
    for line in spec_md.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            for method, path in re.findall(r"`(GET|POST|PUT|PATCH|DELETE) (/[^`\s?]*)`", first_cell):
                in_table.add((method.lower(), path))
    assert in_table, "could not read the API table of SPEC.md"
    assert in_table == set(SPEC_ENDPOINTS)


# --- operations ----------------------------------------------------------------------------


def test_operation_ids_are_unique(doc):
    ids = [op["operationId"] for _, _, op in operations(doc)]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_operation_metadata(doc, method, path):
    op = op_of(doc, method, path)
    assert re.fullmatch(r"[a-z][A-Za-z0-9]+", op.get("operationId", "")), "operationId"
    assert op.get("summary", "").strip(), "summary"
    assert op.get("description", "").strip(), "description"
    assert op.get("tags") and set(op["tags"]) <= ALLOWED_TAGS, "tags"
    statuses = [str(s) for s in op["responses"]]
    assert any(s.startswith("4") for s in statuses), "at least one 4xx response"
    assert any(s.startswith("2") or s.startswith("3") for s in statuses), "a success response"


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_operation_error_codes_are_documented(doc, method, path):
    op = op_of(doc, method, path)
    codes = op.get("x-error-codes")
    assert isinstance(codes, dict), "x-error-codes lists the error codes per status"
    # /readyz 503 is included: besides the readiness report it can be an Error body
    # (temporarily_unavailable), and x-error-codes lists the codes such a body may carry.
    error_statuses = {str(s) for s in op["responses"] if str(s).isdigit() and int(s) >= 400}
    assert set(codes) == error_statuses, "x-error-codes covers exactly the error statuses"
    enum = set(doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"])
    for status, listed in codes.items():
        assert listed, f"{status}: no codes"
        for code in listed:
            assert code in enum, f"{code} is not in the Error enum"
            assert status in CODE_STATUS[code], f"{code} is sent with {CODE_STATUS[code]}, not {status}"
            if code not in GENERIC_CODES:
                assert f"`{code}`" in op["description"], f"description should explain `{code}`"


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_every_operation_answers_the_generic_errors(doc, method, path):
    op = op_of(doc, method, path)
    for status, code in EVERY_OPERATION_CODES.items():
        assert status in op["responses"], f"{status} ({code}) can happen on any operation"
        assert code in op["x-error-codes"].get(status, []), f"x-error-codes {status} should list {code}"


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_415_exactly_where_a_body_is_taken(doc, method, path):
    op = op_of(doc, method, path)
    if "requestBody" in op:
        assert op["responses"].get("415") == {"$ref": "#/components/responses/UnsupportedMediaType"}
        assert op["x-error-codes"]["415"] == ["unsupported_media_type"]
    else:
        assert "415" not in op["responses"], "415 only where the operation takes a body"


def test_every_error_code_is_used(doc):
    enum = doc["components"]["schemas"]["Error"]["properties"]["error"]["enum"]
    assert set(enum) == set(CODE_STATUS)
    used = {code for _, _, op in operations(doc) for codes in op["x-error-codes"].values() for code in codes}
    assert used == set(enum)


# --- errors --------------------------------------------------------------------------------


def test_error_schema(doc):
    error = doc["components"]["schemas"]["Error"]
    assert error["type"] == "object"
    assert error["additionalProperties"] is False
    assert sorted(error["required"]) == ["error", "error_description"]
    assert set(error["properties"]) == {"error", "error_description"}
    for name in ("error", "error_description"):
        assert error["properties"][name]["type"] == "string"


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_error_responses_use_error_schema(doc, method, path):
    for status, raw in op_of(doc, method, path)["responses"].items():
        if status == "default" or int(status) < 400:
            continue
        response = resolve(doc, raw)
        content = response.get("content")
        assert content and "application/json" in content, f"{status}: JSON error body"
        for media_type, media in content.items():
            if media_type.startswith("text/html"):
                continue
            if (method, path, status) == ("get", "/readyz", "503"):
                # The readiness report, or the Error body during shutdown / over the connection limit.
                alternatives = media["schema"].get("oneOf", [media["schema"]])
                assert sorted(a.get("$ref", "") for a in alternatives) == sorted([READINESS_REF, ERROR_REF])
                continue
            assert media["schema"] == {"$ref": ERROR_REF}, f"{status} {media_type}: Error schema"


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_common_errors_use_shared_responses(doc, method, path):
    for status, raw in op_of(doc, method, path)["responses"].items():
        if status in SHARED_ERROR_RESPONSES and (method, path, status) not in OWN_ERROR_RESPONSES:
            assert raw == {"$ref": f"#/components/responses/{SHARED_ERROR_RESPONSES[status]}"}, status


def test_shared_error_responses(doc):
    shared = doc["components"]["responses"]
    assert set(SHARED_ERROR_RESPONSES.values()) <= set(shared)
    assert "Allow" in shared["MethodNotAllowed"]["headers"]
    assert resolve(doc, shared["TooManyRequests"]["headers"]["Retry-After"])["required"] is True
    assert "WWW-Authenticate" in shared["Unauthorized"]["headers"]
    unavailable = shared["ServiceUnavailable"]
    assert "temporarily_unavailable" in unavailable["content"]["application/json"]["examples"]
    assert "Retry-After: 1" in unavailable["description"] and "Connection: close" in unavailable["description"]
    for name in ("ServiceUnavailable", "PayloadTooLarge"):
        connection = resolve(doc, shared[name]["headers"]["Connection"])
        assert connection["schema"]["enum"] == ["close"], name
    assert "Retry-After" in unavailable["headers"]
    for name in ("PayloadTooLarge", "UriTooLong", "HeaderTooLarge"):
        assert "before routing" in shared[name]["description"], f"{name}: checked before routing"
    assert shared["UnsupportedMediaType"]["content"]["application/json"]["example"]["error"] == "unsupported_media_type"


def test_every_401_has_www_authenticate(doc):
    found = 0
    for method, path, status, _, response in responses(doc):
        if status != "401":
            continue
        found += 1
        header = resolve(doc, response.get("headers", {}).get("WWW-Authenticate"))
        assert header, f"{method.upper()} {path}: 401 without WWW-Authenticate"
        assert header.get("required") is True
        # The bearer session token's challenge (RFC 6750), or, where a client authenticates
        # (the standard token and revocation endpoints), HTTP Basic (RFC 6749 §5.2).
        clients = STANDARD_ENDPOINTS + INTROSPECTION_ENDPOINTS
        challenge = 'Basic realm="token-broker"' if (method, path) in clients else 'Bearer error="invalid_token"'
        assert challenge in header["example"]
        assert re.search(header["schema"]["pattern"], challenge)
    assert found >= len(BEARER_ENDPOINTS)


def test_callback_400_is_json_or_html(doc):
    content = resolve(doc, op_of(doc, "get", "/callback")["responses"]["400"])["content"]
    assert set(content) == {"application/json", "text/html"}


# --- headers -------------------------------------------------------------------------------


def test_token_responses_document_cache_control(doc):
    token_responses = 0
    for method, path, status, _, response in responses(doc):
        if not status.startswith("2"):
            continue
        for media in response.get("content", {}).values():
            if "schema" in media and TOKEN_PROPERTIES & set(schema_properties(doc, media["schema"])):
                token_responses += 1
                header = resolve(doc, response.get("headers", {}).get("Cache-Control"))
                assert header, f"{method.upper()} {path} {status}: carries a token, no Cache-Control"
                assert header["schema"]["enum"] == ["no-store"]
                assert header["required"] is True
    # POST /token, GET /token, POST /refresh at least: the test must not pass vacuously.
    assert token_responses >= 3


def test_handoff_redirect_documents_cache_control(doc):
    headers = op_of(doc, "get", "/callback")["responses"]["302"]["headers"]
    assert resolve(doc, headers["Cache-Control"])["schema"]["enum"] == ["no-store"]


def test_every_response_has_request_id(doc):
    for method, path, status, _, response in responses(doc):
        assert response.get("headers", {}).get("X-Request-Id") == {
            "$ref": "#/components/headers/X-Request-Id"
        }, f"{method.upper()} {path} {status}"
    header = doc["components"]["headers"]["X-Request-Id"]
    assert header["required"] is True
    pattern = header["schema"]["pattern"]
    assert re.fullmatch(pattern, "a" * 64) and not re.fullmatch(pattern, "a" * 65)
    assert not re.fullmatch(pattern, "bad id")


def test_every_response_has_nosniff_and_cache_control(doc):
    count = 0
    for method, path, status, _, response in responses(doc):
        headers = response.get("headers", {})
        where = f"{method.upper()} {path} {status}"
        assert headers.get("X-Content-Type-Options") == {"$ref": "#/components/headers/X-Content-Type-Options"}, where
        # No operation notes an exception to Cache-Control: no-store, so every response has it.
        assert resolve(doc, headers.get("Cache-Control"))["schema"]["enum"] == ["no-store"], where
        count += 1
    for name, response in doc["components"]["responses"].items():
        assert "X-Content-Type-Options" in response["headers"], name
    header = doc["components"]["headers"]["X-Content-Type-Options"]
    assert header["required"] is True
    assert header["schema"]["enum"] == ["nosniff"]
    assert count >= 12 * len(EVERY_OPERATION_CODES)


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_every_operation_accepts_request_id(doc, method, path):
    params = op_of(doc, method, path).get("parameters", [])
    assert {"$ref": "#/components/parameters/RequestId"} in params


def test_redirects_have_location(doc):
    for method, path in [("get", "/authorize"), ("get", "/callback"), ("get", "/providers/{provider}/authorize")]:
        headers = op_of(doc, method, path)["responses"]["302"]["headers"]
        location = resolve(doc, headers["Location"])
        assert location["required"] is True and location["schema"]["type"] == "string"


# --- security ------------------------------------------------------------------------------


def test_bearer_scheme(doc):
    scheme = doc["components"]["securitySchemes"]["bearerAuth"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    assert "tbs_" in scheme["description"]
    assert "security" not in doc, "no global security: the flow and operator endpoints are public"
    token = doc["components"]["schemas"]["SessionToken"]
    assert token["pattern"].startswith("^tbs_")
    assert re.fullmatch(token["pattern"], "tbs_" + "A" * 43)
    assert not re.fullmatch(token["pattern"], "A" * 47)


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_operation_security(doc, method, path):
    op = op_of(doc, method, path)
    if (method, path) in BEARER_ENDPOINTS:
        # A bearer session token, or one bound to a key with its DPoP proof (docs/dpop.md).
        assert op.get("security") == [{"bearerAuth": []}, {"dpopAuth": []}]
        assert "401" in op["responses"]
        assert {"$ref": "#/components/parameters/DPoPProof"} in op["parameters"]
    elif (method, path) in ADMIN_ENDPOINTS:
        assert op.get("security") == [{"adminAuth": []}]
        assert op["responses"]["401"] == {"$ref": "#/components/responses/AdminUnauthorized"}
    else:
        assert "security" not in op


# --- parameters and bodies -----------------------------------------------------------------


def query_params(doc, method, path):
    params = [resolve(doc, p) for p in op_of(doc, method, path).get("parameters", [])]
    return {p["name"]: p for p in params if p["in"] == "query"}


def form_schema(doc, method, path):
    body = op_of(doc, method, path)["requestBody"]
    assert body["required"] is True
    assert set(body["content"]) == FORM_MEDIA_TYPES
    form = body["content"]["application/x-www-form-urlencoded"]["schema"]
    # The JSON alternative has the form's fields, and every value must be a string.
    json_parts = body["content"]["application/json"]["schema"]["allOf"]
    assert json_parts == [form, {"$ref": "#/components/schemas/StringValues"}]
    return resolve(doc, form)


def test_json_bodies_are_objects_of_strings(doc):
    strings = doc["components"]["schemas"]["StringValues"]
    assert strings["type"] == "object"
    assert strings["additionalProperties"] == {"type": "string"}
    checked = 0
    for pointer, node in walk(doc):
        if not pointer.endswith("/requestBody"):
            continue
        validator = schema_validator(doc, f"{pointer}/content/application~1json/schema")
        example = node["content"]["application/json"].get("example")
        if example is None:
            continue
        assert validator.is_valid(example)
        some_field = next(iter(example))
        assert not validator.is_valid({**example, some_field: 1}), "a non-string value is refused"
        assert not validator.is_valid({**example, some_field: [example[some_field]]})
        assert not validator.is_valid({**example, "extra": True}), "unknown fields must be strings too"
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("method,path", OPS, ids=OP_IDS)
def test_parameters_are_complete(doc, method, path):
    op = op_of(doc, method, path)
    for raw in op.get("parameters", []):
        param = resolve(doc, raw)
        assert param.get("description", "").strip(), f"{param['name']}: description"
        assert "required" in param, f"{param['name']}: explicit required flag"
        assert resolve(doc, param["schema"]).get("type"), f"{param['name']}: type"
    if "requestBody" in op:
        schema = form_schema(doc, method, path)
        assert schema["required"], "form fields have required flags"
        for name, prop in schema["properties"].items():
            prop = resolve(doc, prop)
            assert prop.get("type"), f"form field {name}: type"
            assert prop.get("description", "").strip(), f"form field {name}: description"


AUTHORIZE_PARAMS = {
    "provider": True,
    "app": True,
    "redirect_uri": True,
    "code_challenge": True,
    "code_challenge_method": True,
    "state": False,
    "scope": False,
    "login_hint": False,
    "prompt": False,
}


def test_get_authorize_parameters(doc):
    params = query_params(doc, "get", "/authorize")
    assert {n: p["required"] for n, p in params.items()} == AUTHORIZE_PARAMS


def test_post_authorize_takes_the_same_fields_with_scope_required(doc):
    schema = form_schema(doc, "post", "/authorize")
    assert set(schema["properties"]) == set(AUTHORIZE_PARAMS)
    assert "scope" in schema["required"]
    # docs/api.md, "Decisions where the specification was silent": POST /authorize needs no provider
    # or app (the session's are used); if given they must match the session's.
    assert set(schema["required"]) >= {n for n, req in AUTHORIZE_PARAMS.items() if req} - {"provider", "app"}
    assert not {"provider", "app"} & set(schema["required"])


def test_pkce_constraints(doc):
    params = query_params(doc, "get", "/authorize")
    challenge = resolve(doc, params["code_challenge"]["schema"])
    assert (challenge["minLength"], challenge["maxLength"]) == (43, 128)
    verifier = resolve(doc, doc["components"]["schemas"]["TokenRequestForm"]["properties"]["code_verifier"])
    for schema in (challenge, verifier):
        pattern = schema["pattern"]
        assert re.fullmatch(pattern, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        assert re.fullmatch(pattern, "a._~-" * 25 + "abc")  # 128 characters
        assert not re.fullmatch(pattern, "a" * 42)
        assert not re.fullmatch(pattern, "a" * 129)
        assert not re.fullmatch(pattern, "a" * 42 + "+")
    method = resolve(doc, params["code_challenge_method"]["schema"])
    assert method["enum"] == ["S256"]


def test_token_form(doc):
    schema = form_schema(doc, "post", "/token")
    fields = ["grant_type", "code", "code_verifier", "redirect_uri", "app", "client_id", "device_code"]
    assert sorted(schema["properties"]) == sorted(fields)
    # Which fields are needed depends on the grant type (the description says which).
    assert schema["required"] == ["grant_type"]
    assert resolve(doc, schema["properties"]["grant_type"])["enum"] == [
        "authorization_code", "urn:ietf:params:oauth:grant-type:device_code"]


def test_device_pages_answer_html(doc):
    for method, path in [("get", "/device"), ("post", "/device"), ("post", "/device/decision")]:
        content = resolve(doc, op_of(doc, method, path)["responses"]["200"])["content"]
        assert set(content) == {"text/html"}
    for method, path in HTML_PAGES:
        for status in ("400", "403", "429", "503"):
            content = resolve(doc, op_of(doc, method, path)["responses"][status])["content"]
            assert set(content) == {"application/json", "text/html"}, (method, path, status)
    for method, path in HTML_READ_PAGES:
        assert set(resolve(doc, op_of(doc, method, path)["responses"]["200"])["content"]) == {"text/html"}
        for status in ("400", "403", "503"):
            content = resolve(doc, op_of(doc, method, path)["responses"][status])["content"]
            assert set(content) == {"application/json", "text/html"}, (method, path, status)
    decision = op_of(doc, "post", "/device/decision")["responses"]["303"]["headers"]
    assert resolve(doc, decision["Location"])["required"] is True


def test_min_ttl(doc):
    min_ttl = query_params(doc, "get", "/token")["min_ttl"]
    assert min_ttl["required"] is False
    assert min_ttl["schema"] == {"type": "integer", "minimum": 0, "maximum": 86400}


def test_callback_parameters(doc):
    params = query_params(doc, "get", "/callback")
    assert set(params) == {"state", "code", "error", "error_description", "iss"}
    assert params["state"]["required"] is True


# --- response bodies -----------------------------------------------------------------------


def response_schema(doc, method, path, status, media_type="application/json"):
    response = resolve(doc, op_of(doc, method, path)["responses"][status])
    return resolve(doc, response["content"][media_type]["schema"])


def test_authorize_answers(doc):
    get = op_of(doc, "get", "/authorize")["responses"]
    assert "302" in get and "content" not in get["302"]
    for method in ("get", "post"):
        schema = response_schema(doc, method, "/authorize", "200")
        assert schema["required"] == ["authorization_url"]
        assert schema["properties"]["authorization_url"]["format"] == "uri"


def test_token_response_shapes(doc):
    full = response_schema(doc, "post", "/token", "200")
    fields = {"access_token", "token_type", "expires_in", "scope", "provider"}
    # access_token is absent when the provider bound its token to the broker's key (token_type DPoP).
    required = fields - {"access_token"}
    assert set(full["properties"]) == fields | {"session_token", "session_token_type"}
    assert set(full["required"]) == required, "session_token is optional (incremental authorization)"
    assert resolve(doc, full["properties"]["token_type"])["enum"] == ["Bearer", "DPoP"]
    for method, path in [("get", "/token"), ("post", "/refresh")]:
        schema = response_schema(doc, method, path, "200")
        assert set(schema["properties"]) == fields
        assert set(schema["required"]) == required
        assert schema["additionalProperties"] is False


def test_revoke_response(doc):
    schema = response_schema(doc, "post", "/revoke", "200")
    assert schema["properties"]["revoked"]["enum"] == [True]
    assert set(schema["properties"]["provider_revocation"]["enum"]) == {
        "succeeded",
        "queued",
        "not_supported",
        "not_attempted",
    }


def test_profile_response(doc):
    schema = response_schema(doc, "get", "/profile", "200")
    assert set(schema["properties"]) == {"sub", "name", "email", "email_verified", "picture", "provider", "raw"}
    for nullable in ("name", "email", "email_verified", "picture"):
        assert schema["properties"][nullable]["nullable"] is True
    assert schema["properties"]["raw"]["type"] == "object"


def test_session_response(doc):
    schema = response_schema(doc, "get", "/session", "200")
    props = schema["properties"]
    assert set(props) == {"provider", "subject", "scopes", "created_at", "access_token_expires_at", "refreshable", "provider_token_type"}
    assert props["provider_token_type"]["enum"] == ["Bearer", "DPoP"]
    assert props["scopes"]["type"] == "array" and props["scopes"]["items"]["type"] == "string"
    assert props["created_at"]["format"] == "date-time"
    assert props["access_token_expires_at"]["format"] == "date-time"
    assert props["access_token_expires_at"]["nullable"] is True
    assert props["refreshable"]["type"] == "boolean"


def test_operator_responses(doc):
    assert response_schema(doc, "get", "/healthz", "200")["properties"]["status"]["enum"] == ["ok"]
    ready = response_schema(doc, "get", "/readyz", "200")
    unready = response_schema(doc, "get", "/readyz", "503")
    assert [resolve(doc, alternative) for alternative in unready["oneOf"]] == [
        ready,
        doc["components"]["schemas"]["Error"],
    ]
    assert set(ready["properties"]["status"]["enum"]) == {"ready", "not_ready"}
    assert "checks" in ready["required"]
    # Both 503 bodies are shown, and each example matches exactly one of the alternatives.
    media = resolve(doc, op_of(doc, "get", "/readyz")["responses"]["503"])["content"]["application/json"]
    examples = {name: e["value"] for name, e in media["examples"].items()}
    assert set(examples) == {"not_ready", "temporarily_unavailable"}
    readiness, error = schema_validator(doc, READINESS_REF), schema_validator(doc, ERROR_REF)
    assert readiness.is_valid(examples["not_ready"]) and not error.is_valid(examples["not_ready"])
    assert examples["not_ready"]["status"] == "not_ready"
    assert error.is_valid(examples["temporarily_unavailable"])
    assert not readiness.is_valid(examples["temporarily_unavailable"])
    assert examples["temporarily_unavailable"]["error"] == "temporarily_unavailable"
    headers = resolve(doc, op_of(doc, "get", "/readyz")["responses"]["503"])["headers"]
    assert {"Retry-After", "Connection"} <= set(headers)
    metrics = resolve(doc, op_of(doc, "get", "/metrics")["responses"]["200"])
    assert set(metrics["content"]) == {"text/plain; version=0.0.4"}


def test_examples_match_their_schemas(doc):
    checked = 0
    for pointer, node in walk(doc):
        if not (isinstance(node, dict) and "schema" in node):
            continue
        examples = []
        if "example" in node:
            examples.append(node["example"])
        examples += [e["value"] for e in node.get("examples", {}).values()]
        if not examples:
            continue
        validator = schema_validator(doc, f"{pointer}/schema")
        for example in examples:
            errors = [e.message for e in validator.iter_errors(example)]
            assert not errors, f"{pointer}: {errors}"
            checked += 1
    assert checked >= 10


def test_examples_would_catch_a_bad_body(doc):
    # The example check above is only worth something if a wrong body fails it.
    validator = schema_validator(doc, "#/components/schemas/TokenResponse")
    good = {
        "access_token": "x",
        "token_type": "Bearer",
        "expires_in": None,
        "scope": "",
        "provider": "github",
    }
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "token_type": "bearer"})
    assert not validator.is_valid({**good, "refresh_token": "never leaves the broker"})
    assert not validator.is_valid({**good, "session_token": "not-a-broker-token-" + "a" * 40})
    errors = schema_validator(doc, ERROR_REF)
    assert not errors.is_valid({"error": "invalid_request"})
    assert not errors.is_valid({"error": "made_up", "error_description": "x"})
