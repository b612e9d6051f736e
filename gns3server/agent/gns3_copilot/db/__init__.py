"""The copilot's SQLite files: one thread and one connection per file, versioned schemas.

:class:`Database` runs every use of a file on a thread of its own; :class:`Schema`
lists a component's migrations. Nothing here knows what the tables hold: each store
(``service.session_store``, ``service.faults``, ``console.audit``, ``api.llm_config_store``,
``mcp.keys``) declares its own schema and queries through its database.
"""

from .database import BUSY_TIMEOUT_MS, Database, DatabaseClosedError, checkpoint_wal
from .schema import (
    Migration,
    MigrationError,
    Schema,
    SchemaError,
    SchemaTooNewError,
    add_missing_columns,
)

__all__ = [
    "BUSY_TIMEOUT_MS",
    "Database",
    "DatabaseClosedError",
    "Migration",
    "MigrationError",
    "Schema",
    "SchemaError",
    "SchemaTooNewError",
    "add_missing_columns",
    "checkpoint_wal",
]
