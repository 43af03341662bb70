"""soda's state in one SQLite file: connection, migrations, queries.

May import: config, contracts, errors, llm, system.
"""

from sqlite_utils import Database

from soda.store.db import now, open_db

__all__ = ["Database", "now", "open_db"]
