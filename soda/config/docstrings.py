"""Attribute docstrings as field descriptions, each module read once.

soda's models document every field with the string under it (`soda init` writes
the commented soda.toml from them; the agents' JSON Schemas carry them). pydantic's
own `use_attribute_docstrings` finds each class's source by asking `inspect` for
the module of every frame on the stack and parsing the class again: about 90 ms
of every soda process's start-up for soda's models. `Documented` parses each
module's source once, reads every class in it from that one tree, and builds a
model's schema only when it is first used (`defer_build`), so a process pays
only for the models it uses (pydantic builds it under a lock: threads may meet
a model first at once; hence pydantic>=2.14.4).

The rule is pydantic's: a string statement right after an annotated field is that
field's description, unless the field names one (`Field(description=...)`).
"""

from __future__ import annotations

import ast
import inspect
import itertools
import sys
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

Scope = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


class Documented(BaseModel):
    """A model whose fields are described by their attribute docstrings."""

    model_config = ConfigDict(defer_build=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        docs = class_docs(cls)
        for name, info in cls.__pydantic_fields__.items():
            if info.description is None and name in docs:
                info.description = docs[name]


def class_docs(cls: type) -> dict[str, str]:
    """`cls`'s attribute docstrings by field name ({} when its source is not found)."""
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None)
    if not filename:
        return {}
    return module_docs(filename).get(cls.__qualname__, {})


@cache
def module_docs(filename: str) -> dict[str, dict[str, str]]:
    """Every class in the module at `filename`, by qualified name, with its
    attribute docstrings (a class defined twice under one name: the first)."""
    try:
        tree = ast.parse(Path(filename).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}
    found: dict[str, dict[str, str]] = {}
    _walk(tree, "", found)
    return found


def _walk(scope: Scope, prefix: str, found: dict[str, dict[str, str]]) -> None:
    for node in _children(scope.body):
        if isinstance(node, ast.ClassDef):
            name = prefix + node.name
            found.setdefault(name, _attribute_docs(node.body))
            _walk(node, f"{name}.", found)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            _walk(node, f"{prefix}{node.name}.<locals>.", found)


def _children(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of `body`, and those nested in its compound statements (a
    class defined under an `if` or a `try` is still in the same scope)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            out += _children([n for n in getattr(node, field, []) if isinstance(n, ast.stmt)])
        for handler in getattr(node, "handlers", []):
            out += _children(handler.body)
    return out


def _attribute_docs(body: list[ast.stmt]) -> dict[str, str]:
    docs: dict[str, str] = {}
    for before, after in itertools.pairwise(body):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[before.target.id] = inspect.cleandoc(after.value.value)
    return docs
