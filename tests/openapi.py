"""GitHub's published OpenAPI description (the `@octokit/openapi` npm package, put
in `.openapi/` by scripts/setup-tests), as the judge of the forge stand-in.

`validate(method, template, status, body)` checks an answer against the schema
GitHub publishes for that operation and status; `example(method, template,
status)` builds a minimal instance of that schema (required fields only), which
the stand-in fills with the facts it keeps. OpenAPI 3.0's `nullable` becomes a
JSON Schema type union; references resolve inside the description.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
DESCRIPTION = ROOT / ".openapi/node_modules/@octokit/openapi/generated/api.github.com.json"
MISSING = (
    f"GitHub's OpenAPI description is missing ({DESCRIPTION.relative_to(ROOT)}):"
    " run scripts/setup-tests (it installs the pinned @octokit/openapi npm package)"
)


@functools.cache
def description() -> dict[str, Any]:
    if not DESCRIPTION.is_file():
        raise AssertionError(MISSING)
    spec: dict[str, Any] = json.loads(DESCRIPTION.read_text())
    return spec


@functools.cache
def _components() -> dict[str, Any]:
    return {"schemas": _nullable(description()["components"]["schemas"])}


def _nullable(node: Any) -> Any:
    """OpenAPI 3.0 `nullable: true` as JSON Schema: null is one more type."""
    if isinstance(node, list):
        return [_nullable(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _nullable(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        else:
            return {"anyOf": [out, {"type": "null"}]}
    return out


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = description()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def response_schema(method: str, template: str, status: int) -> dict[str, Any]:
    """The JSON schema GitHub publishes for this operation's answer."""
    operation = description()["paths"][template][method.lower()]
    response = _resolve(operation["responses"][str(status)])
    return dict(response["content"]["application/json"]["schema"])


@functools.cache
def _validator(method: str, template: str, status: int) -> Draft202012Validator:
    schema = _nullable(response_schema(method, template, status))
    schema["components"] = _components()
    return Draft202012Validator(schema)


def validate(method: str, template: str, status: int, body: Any) -> list[str]:
    """Where `body` breaks GitHub's schema (empty: it conforms)."""
    errors = _validator(method, template, status).iter_errors(body)
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message[:200]}" for e in errors]


def example(method: str, template: str, status: int) -> Any:
    """A minimal instance of the answer's schema: every required field, nothing else."""
    return _instance(response_schema(method, template, status), 0)


def _instance(schema: dict[str, Any], depth: int) -> Any:
    schema = _resolve(schema)
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = _instance(part, depth)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return _instance(schema[key][0], depth)
    if schema.get("nullable") and depth > 0:
        return None
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {
            name: _instance(props.get(name, {"type": "string"}), depth + 1)
            for name in schema.get("required", [])
        }
    if kind == "array":
        return []
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    return _string(schema.get("format"))


def _string(form: str | None) -> str:
    return {
        "date-time": "2026-01-01T00:00:00Z",
        "uri": "https://example.invalid/x",
        "uri-template": "https://example.invalid/x{/y}",
        "email": "x@example.invalid",
    }.get(form or "", "x")


def component(name: str) -> Any:
    """A minimal instance of a component schema (`pull-request-review-comment`, ...)."""
    return _instance({"$ref": f"#/components/schemas/{name}"}, 0)
