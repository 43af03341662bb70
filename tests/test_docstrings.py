"""soda.config.docstrings: attribute docstrings become field descriptions exactly
as pydantic's own `use_attribute_docstrings` makes them, checked against twins
pydantic builds. soda's own models are checked by their schema files
(tests/test_contracts.py) and every section's documented fields (tests/test_config.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from soda.config.docstrings import Documented, module_docs

PYDANTICS = ConfigDict(use_attribute_docstrings=True)


class Mine(Documented):
    plain: int = 3
    """A default.

        Indented lines are cleaned as pydantic cleans them."""
    bare: str
    """No default."""
    field: int = Field(default=1, ge=0)
    """A Field without a description."""
    named: int = Field(default=2, description="its own")
    """Loses to the Field's own description."""
    undocumented: bool = False


class Theirs(BaseModel):
    model_config = PYDANTICS
    plain: int = 3
    """A default.

        Indented lines are cleaned as pydantic cleans them."""
    bare: str
    """No default."""
    field: int = Field(default=1, ge=0)
    """A Field without a description."""
    named: int = Field(default=2, description="its own")
    """Loses to the Field's own description."""
    undocumented: bool = False


class Child(Mine):
    extra: float = 0.5
    """Only in the child."""


class TheirChild(Theirs):
    model_config = PYDANTICS
    extra: float = 0.5
    """Only in the child."""


def schema(model: type[BaseModel]) -> dict[str, Any]:
    found = model.model_json_schema()
    found.pop("title")
    return found


def test_descriptions_are_pydantics() -> None:
    assert schema(Mine) == schema(Theirs)
    assert schema(Child) == schema(TheirChild)
    assert Mine.model_fields["plain"].description == (
        "A default.\n\nIndented lines are cleaned as pydantic cleans them."
    )
    assert Mine.model_fields["named"].description == "its own"
    assert Mine.model_fields["undocumented"].description is None


def test_a_class_in_a_function_or_under_a_block_is_found() -> None:
    def local() -> type[Documented]:
        class Inner(Documented):
            x: int = 0
            """Inside a function."""

        return Inner

    if True:  # a class under a block is still in its scope

        class Blocked(Documented):
            y: int = 0
            """Under a block."""

    assert local().model_fields["x"].description == "Inside a function."
    assert Blocked.model_fields["y"].description == "Under a block."
    assert "test_a_class_in_a_function_or_under_a_block_is_found.<locals>.local.<locals>.Inner" in (
        module_docs(__file__)
    )
