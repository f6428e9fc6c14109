"""Contract tests for openapi.yaml.

They check that the document is valid OpenAPI 3.0.3 and that it keeps the promises SPEC.md makes
about the HTTP API: every endpoint present, one shared Error schema, a WWW-Authenticate header on
every 401, Cache-Control on every response that carries a token, X-Request-Id and
X-Content-Type-Options everywhere, the errors every operation can answer (413/414/431 before
routing, 503 temporarily_unavailable), and 415 on every form body. (The parameters and the
constraints of the PKCE flow, the request bodies and their JSON alternative, the response bodies
and the examples: test_openapi_bodies.py.)

Run: .venv/bin/python -m pytest -q Tests/contract
"""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate

from openapi_doc import (
    ADMIN_ENDPOINTS, ALLOWED_TAGS, BEARER_ENDPOINTS, CLIENT_KEY_ENDPOINTS, CODE_STATUS, DEVICE_ENDPOINTS,
    ERROR_REF, EVERY_OPERATION_CODES, GENERIC_CODES, HTML_ONLY_ERROR_RESPONSES, INTROSPECTION_ENDPOINTS,
    LOGOUT_ENDPOINTS, OP_IDS, OPS, OWN_ERROR_RESPONSES, PROXY_ENDPOINTS, READINESS_REF, SHARED_ERROR_RESPONSES, SPEC_ENDPOINTS,
    SPEC_MD_CANDIDATES, STANDARD_ENDPOINTS, TOKEN_PROPERTIES, load_doc, op_of, operations, resolve, responses,
    schema_properties, walk,
)


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
def test_the_errors_a_description_lists_are_in_x_error_codes(doc, method, path):
    """The other way round: each "- 429 `rate_limited`: ..." of the description's **Errors** is
    a status the operation documents with that code (one removed from the lists while the text
    still said it could happen went unseen)."""
    op = op_of(doc, method, path)
    _, errors = op.get("description", "").partition("**Errors**")[::2]
    for status, code in re.findall(r"^- (\d{3}) `([a-z_]+)`", errors, re.MULTILINE):
        assert code in op["x-error-codes"].get(status, []), f"the description says {status} {code}"
        assert status in op["responses"], f"the description says {status}"


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
        if (method, path, status) in HTML_ONLY_ERROR_RESPONSES:
            assert content and list(content) == ["text/html"], f"{status}: a page only"
            continue
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
