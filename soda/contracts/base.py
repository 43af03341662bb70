"""The `Contract` base model and the small types several contracts share.

Every contract is closed (`extra="forbid"`, so its schema says
`additionalProperties: false`) and takes its field descriptions from the
docstrings under each attribute. A field added to an agent's answer later has a
default and is still asked for in full (`asked_in_full`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict

from soda.config.docstrings import Documented


class Contract(Documented):
    model_config = ConfigDict(extra="forbid")


def asked_in_full(schema: dict[str, Any]) -> None:
    """A model's JSON Schema as strict modes want it (`json_schema_extra`): every
    property required, no `default`. The model keeps its defaults, so a document
    written before a field existed (a stored plan, a test's fake) still reads:
    `soda.contracts.schema.validate` fills an absent defaulted field first."""
    properties = schema.get("properties", {})
    for prop in properties.values():
        prop.pop("default", None)
    schema["required"] = list(properties)


Confidence = Literal["high", "medium", "low"]
