"""Which backend a database URL names, and opening it."""

from __future__ import annotations

from pathlib import Path

from reasoning_service.logging_setup import SecretMask
from reasoning_service.settings import check_database_url
from reasoning_service.store.base import Store

__all__ = ["is_postgres_url", "open_store", "sqlite_path_of"]

_SQLITE = "sqlite:///"


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


def sqlite_path_of(url: str) -> Path | None:
    """The file of a `sqlite:///<path>` URL (`sqlite:////abs/path` for an absolute one), or
    None for any other URL."""
    return Path(url.removeprefix(_SQLITE)) if url.startswith(_SQLITE) else None


def open_store(url: str, *, mask: SecretMask | None = None, pool_size: int = 4) -> Store:
    """Open (and migrate) the store a URL names.

    Raises:
        ConfigError: not a sqlite or postgresql URL.
        StoreError: the database cannot be reached.
    """
    check_database_url(url)
    path = sqlite_path_of(url)
    if path is not None:
        from reasoning_service.store.sqlite import SqliteStore

        return SqliteStore(path, mask=mask)
    from reasoning_service.store.postgres import PostgresStore

    return PostgresStore(url, mask=mask, pool_size=pool_size)
