"""Server bugs the contract fuzzing found and that are not fixed yet: openapi.yaml is right.

Each entry is an expected failure, kept as narrow as it can be:

- `request` is the exact request that shows the bug and `contract` what openapi.yaml requires of
  its answer. test_schemathesis.py::test_known_server_bug sends it and checks the answer, marked
  xfail(strict=True): once the broker is fixed the test XPASSes, and that fails the run until the
  entry is deleted here.
- `field` and `matches(value)` recognise the bug's input in a generated request. The
  filter_failure hook in schemathesis_hooks.py drops a negative_data_rejection failure ("schema-
  violating request accepted") only when explaining_bugs() says known bugs explain it entirely:
  with each such field given a valid value, the request the broker received is valid against
  openapi.yaml. Any other failure, and the same check on any other input, still fails the run.

When a bug is fixed, delete its entry; nothing else needs to change.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import parse_qs, urlsplit

import yaml
from openapi_schema_validator import OAS30Validator

OPENAPI = Path(__file__).resolve().parents[2] / "openapi.yaml"

Fields = dict  # parameter name -> the string the server received


@dataclass(frozen=True)
class KnownBug:
    id: str
    summary: str
    request: dict  # method, path, query or form: the valid development-mode flow plus the one bad value
    contract: str  # what openapi.yaml requires of the answer
    fix: str
    operations: frozenset
    field: Optional[str] = None  # the field whose value shows the bug in a generated request
    matches: Callable[[str], bool] = lambda value: False
    valid_value: str = ""  # a value of `field` that the contract and the broker both accept


# Every bug the fuzzing found so far is fixed; new ones are added here until they are.
KNOWN_BUGS: list = []


@lru_cache(maxsize=None)
def _document() -> dict:
    with OPENAPI.open(encoding="utf-8") as f:
        return yaml.safe_load(f)


def _resolve(node):
    document = _document()
    while isinstance(node, dict) and "$ref" in node:
        target = document
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


@lru_cache(maxsize=None)
def _fields_validator(label: str) -> OAS30Validator:
    """A validator for the fields of an operation as the server reads them (every value a string)."""
    method, path = label.split()
    operation = _document()["paths"][path][method.lower()]
    if "requestBody" in operation:
        schema = operation["requestBody"]["content"]["application/x-www-form-urlencoded"]["schema"]
    else:
        params = [_resolve(p) for p in operation.get("parameters", [])]
        params = [p for p in params if p["in"] == "query"]
        schema = {"type": "object", "properties": {p["name"]: p["schema"] for p in params},
                  "required": [p["name"] for p in params if p["required"]]}
    root = dict(_document())
    root.update(schema if "$ref" not in schema else {"$ref": schema["$ref"]})
    return OAS30Validator(root)


def received_fields(label: str, request) -> Optional[Fields]:
    """The /authorize fields the server received (None when not a flat set of strings)."""
    if label == "GET /authorize":
        pairs = parse_qs(urlsplit(request.url).query, keep_blank_values=True)
    elif label == "POST /authorize":
        body = request.body or b""
        body = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        content_type = request.headers.get("Content-Type", "")
        if content_type.startswith("application/x-www-form-urlencoded"):
            pairs = parse_qs(body, keep_blank_values=True)
        elif content_type.startswith("application/json"):
            try:
                data = json.loads(body)
            except ValueError:
                return None
            if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
                return None
            pairs = {k: [v] for k, v in data.items()}
        else:
            return None
    else:
        return None
    if any(len(values) != 1 for values in pairs.values()):
        return None  # a repeated parameter is a 400 in its own right
    return {name: values[0] for name, values in pairs.items()}


def explaining_bugs(label: str, fields: Fields) -> list[KnownBug]:
    """The known bugs that explain the acceptance of these fields, or [] when they do not all.

    Every field that shows a known bug is given a valid value; the request must then be valid
    against openapi.yaml. Otherwise something besides the known bugs was accepted, and the
    failure stands.
    """
    found = [bug for bug in KNOWN_BUGS if label in bug.operations and bug.field in fields
             and bug.matches(fields[bug.field])]
    if not found:
        return []
    repaired = dict(fields)
    for bug in found:
        repaired[bug.field] = bug.valid_value
    return found if _fields_validator(label).is_valid(repaired) else []
