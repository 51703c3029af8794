"""A throwaway PostgreSQL server for tests and benchmarks: initdb and pg_ctl in a temporary folder.

It listens on 127.0.0.1 on a free port, trusts local connections, skips fsync (it is thrown away)
and is stopped and deleted on exit. PostgreSQL refuses to run as root, so as root the server runs
as the `postgres` user that Debian's package creates. Nothing here touches a server it did not
start.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from types import TracebackType

import psycopg

__all__ = ["TemporaryPostgres", "find_postgres_bin"]


def find_postgres_bin() -> Path | None:
    """The folder of `pg_ctl` and `initdb`: on PATH, else Debian's newest; None when absent."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    return Path(versions[-1]).parent if versions else None


def _version(path: str) -> int:
    part = Path(path).parts[-3]
    return int(part) if part.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryPostgres:
    """`with TemporaryPostgres() as pg: pg.create_database()` → a `postgresql://` URL."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        found = bin_dir or find_postgres_bin()
        if found is None:
            raise FileNotFoundError("pg_ctl and initdb: PostgreSQL is not installed")
        self._bin = found
        self._user = "postgres" if os.geteuid() == 0 else None
        self._root = Path(tempfile.mkdtemp(prefix="reasoning-pg-"))
        self._data = self._root / "data"
        self.port = _free_port()
        self._running = False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> TemporaryPostgres:
        if self._user is not None:
            shutil.chown(self._root, user=self._user)
        self._run("initdb", "-D", str(self._data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -k {self._root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self._data), "-l", str(self._root / "log"), "-o", options, "-w",
            "start",
        )  # fmt: skip
        self._running = True
        return self

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; returns its URL."""
        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'create database "{name}"')  # type: ignore[call-overload]  # our name
        return self.url(name)

    def stop(self) -> None:
        if self._running:
            self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "-w", "stop")
            self._running = False
        shutil.rmtree(self._root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [str(self._bin / program), *args],
            check=True,
            capture_output=True,
            user=self._user,
            cwd=self._root,
            timeout=120,
        )

    def __enter__(self) -> TemporaryPostgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
