"""The registry of named contracts, their schema files, and the one validator.

`CONTRACTS` maps each name to its model; `generate_schema` renders the JSON
Schema written to schemas/NAME.json (`_write_all`, run by `python -m
soda.contracts --write`); `load_schema` reads the file back, and `validate`
checks a document against it and the model, returning the typed object or a
`Violation`.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, get_args

import jsonschema
from pydantic import BaseModel, ValidationError

from soda.config.resources import resource_dir
from soda.contracts.base import Contract
from soda.contracts.claims import Claims
from soda.contracts.execute import ExecuteResult
from soda.contracts.human import HumanInput
from soda.contracts.orient import Assessment, IterationPlan, Orientation, Planning, Verification
from soda.contracts.planning_choice import PlanningChoice
from soda.contracts.retry import RetryAdvice
from soda.errors import InputError, Violation

T = TypeVar("T", bound=Contract)

CONTRACTS: dict[str, type[Contract]] = {
    "claims": Claims,
    "verification": Verification,
    "assessment": Assessment,
    "planning": Planning,
    "orient": Orientation,
    "plan": IterationPlan,
    "execute": ExecuteResult,
    "retry": RetryAdvice,
    "human_input": HumanInput,
    "planning_choice": PlanningChoice,
}


# --- schema files -----------------------------------------------------------


def generate_schema(name: str) -> dict[str, Any]:
    """The JSON Schema for contract `name`, as it is written to schemas/NAME.json."""
    model = CONTRACTS[name]
    schema = _strip_titles(model.model_json_schema(mode="validation"))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:soda:contract:{name}",
        "title": name,
        **schema,
    }


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated titles: noise for readers and for models."""
    if isinstance(node, dict):
        return {
            key: _strip_titles(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node


def schema_path(name: str) -> Path:
    return resource_dir("schemas") / f"{name}.json"


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The contract file for `name`; InputError naming the known ones if unknown."""
    if name not in CONTRACTS:
        raise InputError(f"unknown contract {name!r}; known: {', '.join(sorted(CONTRACTS))}")
    schema: dict[str, Any] = json.loads(schema_path(name).read_text(encoding="utf-8"))
    return schema


# --- validation -------------------------------------------------------------


def validate(name: str, data: Any, model: type[T] | None = None) -> T | Violation:
    """Check `data` against contract `name`: the typed object, or the first violation.

    The JSON Schema file is checked first (it is what a model was told), then the
    pydantic model (which adds cross-field rules such as HumanInput's per-kind needs).
    A field the model has a default for and `data` leaves out is filled in first
    (`with_defaults`): a document written before the field existed stays valid.
    """
    schema = load_schema(name)
    target = model or CONTRACTS[name]
    data = with_defaults(target, data)
    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        return Violation(
            contract=name,
            path=_json_path(error.absolute_path),
            rule=str(error.validator),
            message=error.message[:300],
            value=_clip(error.instance),
        )
    try:
        return target.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        return Violation(
            contract=name,
            path=_json_path(first["loc"]),
            rule=first["type"],
            message=first["msg"],
            value=_clip(first.get("input")),
        )


def with_defaults(model: type[BaseModel], data: Any) -> Any:
    """`data` (an object for `model`) with every absent field that has a default
    filled in with it, in nested models too (a model, a list of them, or one or
    null); anything else as it is."""
    if not isinstance(data, dict):
        return data
    filled = dict(data)
    for name, field in model.model_fields.items():
        if name not in filled:
            if not field.is_required():
                filled[name] = field.get_default(call_default_factory=True)
            continue
        for inner in _models_in(field.annotation):
            value = filled[name]
            if isinstance(value, list):
                filled[name] = [with_defaults(inner, item) for item in value]
            else:
                filled[name] = with_defaults(inner, value)
    return filled


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation holds: `M`, `list[M]`, `M | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [found for arg in get_args(annotation) for found in _models_in(arg)]


def _json_path(parts: Any) -> str:
    path = "$"
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _clip(value: Any) -> Any:
    text = json.dumps(value, default=str)
    return value if len(text) <= 200 else text[:200] + "..."


def _write_all() -> None:
    for name in CONTRACTS:
        path = schema_path(name)
        path.write_text(json.dumps(generate_schema(name), indent=2) + "\n", encoding="utf-8")
        print(f"wrote {path}")
