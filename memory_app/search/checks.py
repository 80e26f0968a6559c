"""Recall's system check, registered by MemoryAppConfig.ready() (run by `manage.py check`)."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Info
from django.db import DatabaseError

from memory_app.search import schema


def check_vector_engine(app_configs: Any = None, databases: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Which vector engine recall runs on (`manage.py check --database default`): pgvector when
    the migration found the extension, else the in-process IVF index (search/ann.py)."""
    if not databases:
        return []
    try:
        installed = schema.pgvector_installed()
        available = schema.pgvector_available()
    except DatabaseError:  # not migrated yet: the migration decides
        return []
    if installed:
        return [Info("Recall's vector engine: pgvector (HNSW).", id="memsite.I001")]
    hint = (
        "The server has pgvector: run `manage.py reindex` to enable it."
        if available
        else "Its files are in SEARCH_ANN_DIR: several machines need it on shared storage (docs/scaling.md)."
    )
    return [Info("Recall's vector engine: in-process IVF index (faiss).", hint=hint, id="memsite.I002")]
