from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from soda.contracts import (
    CONTRACTS,
    HumanInput,
    IterationPlan,
    generate_schema,
    load_schema,
    schema_path,
    validate,
)
from soda.errors import InputError, Violation

# Keywords the model APIs' strict structured output rejects or ignores.
UNSUPPORTED = {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "if",
    "then",
    "else",
    "oneOf",
    "not",
    "patternProperties",
}
AGENT_ANSWERS = ["verification", "assessment", "planning", "orient", "plan", "execute"]


def walk(node: Any, path: str = "$") -> list[tuple[str, dict]]:
    found: list[tuple[str, dict]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found += walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += walk(value, f"{path}[{index}]")
    return found


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_schema_file_matches_model(name: str) -> None:
    on_disk = json.loads(schema_path(name).read_text())
    assert on_disk == generate_schema(name), (
        f"schemas/{name}.json drifted from soda.contracts; run python -m soda.contracts --write"
    )


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_schema_is_valid_2020_12(name: str) -> None:
    schema = load_schema(name)
    assert schema["$schema"].endswith("2020-12/schema")
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_schema_fits_structured_output_restrictions(name: str) -> None:
    for path, node in walk(load_schema(name)):
        bad = UNSUPPORTED & set(node) - {"properties"}
        if path.endswith(".properties") or path.endswith(".$defs"):
            continue
        assert not bad, f"{name} {path} uses {bad}"
        if node.get("type") == "object":
            assert node.get("additionalProperties") is False, f"{name} {path} is open"
            assert "properties" in node, f"{name} {path} is a free-form dict"


@pytest.mark.parametrize("name", AGENT_ANSWERS)
def test_agent_answers_require_every_field(name: str) -> None:
    for path, node in walk(load_schema(name)):
        if node.get("type") == "object" and not path.endswith(".properties"):
            # A field added later may be optional with a default (older answers
            # stay valid); every other field is required.
            fields = {k for k, v in node["properties"].items() if "default" not in v}
            assert set(node.get("required", [])) == fields, f"{name} {path}"


def plan(**overrides: Any) -> dict[str, Any]:
    task = {
        "id": "a",
        "task_id": None,
        "title": "Add add()",
        "description": "Write add and a test",
        "depends_on": [],
        "risk": "low",
        "tool_hints": [],
    }
    return {"intent": "add", "approach": "tdd", "tasks": [{**task, **overrides}]}


def test_validate_returns_typed_object() -> None:
    result = validate("plan", plan())
    assert isinstance(result, IterationPlan)
    assert result.tasks[0].risk == "low"


def test_violation_names_path_rule_and_value() -> None:
    result = validate("plan", plan(risk="extreme"))
    assert isinstance(result, Violation)
    assert result.path == "$.tasks[0].risk"
    assert result.rule == "enum"
    assert result.value == "extreme"


def test_missing_field_is_a_violation() -> None:
    data = plan()
    del data["tasks"][0]["depends_on"]
    result = validate("plan", data)
    assert isinstance(result, Violation)
    assert result.rule == "required"
    assert result.path == "$.tasks[0]"


def test_extra_field_is_a_violation() -> None:
    result = validate("plan", {**plan(), "bonus": 1})
    assert isinstance(result, Violation) and result.rule == "additionalProperties"


def test_human_input_cross_field_rule_comes_from_the_model() -> None:
    result = validate("human_input", {"kind": "approve"})
    assert isinstance(result, Violation)
    assert "needs 'target'" in result.message
    ok = validate("human_input", {"kind": "approve", "target": 3})
    assert isinstance(ok, HumanInput) and ok.target == 3


def test_unknown_contract_is_an_input_error() -> None:
    with pytest.raises(InputError, match="known: "):
        load_schema("nope")
