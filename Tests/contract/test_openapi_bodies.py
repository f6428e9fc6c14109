"""Contract tests for openapi.yaml: its parameters and request bodies (the PKCE flow's
constraints, form bodies with a JSON alternative of strings), its response bodies, and its
examples against their schemas. (The document as a whole, its endpoints, operations, errors,
headers and security: test_openapi.py.)

Run: .venv/bin/python -m pytest -q Tests/contract
"""

from __future__ import annotations

import re

import pytest

from openapi_doc import (
    ERROR_REF, FORM_MEDIA_TYPES, HTML_PAGES, HTML_QUESTION_PAGES, HTML_READ_PAGES, OP_IDS, OPS, READINESS_REF, op_of, resolve,
    schema_validator, walk,
)


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
    for method, path in [("get", "/device"), ("get", "/device/decision"), ("get", "/device/refused")]:
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
    for method, path in HTML_QUESTION_PAGES:
        responses = op_of(doc, method, path)["responses"]
        assert set(resolve(doc, responses["200"])["content"]) == {"text/html"}
        for status in ("400", "503"):
            assert set(resolve(doc, responses[status])["content"]) == {"application/json", "text/html"}, (method, path, status)
    for method, path in [("post", "/device"), ("post", "/device/decision")]:
        onward = op_of(doc, method, path)["responses"]["303"]["headers"]
        assert resolve(doc, onward["Location"])["required"] is True


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
