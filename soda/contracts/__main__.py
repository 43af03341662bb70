"""`python -m soda.contracts --write`: regenerate schemas/*.json from the models."""

from __future__ import annotations

import sys

from soda.contracts.schema import _write_all

if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m soda.contracts --write   (regenerates schemas/*.json)")
    _write_all()
