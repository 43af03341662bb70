"""The `Contract` base model and the small types several contracts share.

Every contract is closed (`extra="forbid"`, so its schema says
`additionalProperties: false`) and takes its field descriptions from the
docstrings under each attribute.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


Confidence = Literal["high", "medium", "low"]
