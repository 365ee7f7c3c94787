"""A throwaway, real PostgreSQL server for the test suite: initdb + pg_ctl on a temp dir.

The PostgreSQL store is tested against the real thing, not a mock. :func:`start` finds
``initdb``/``pg_ctl`` (``PATH``, then ``/usr/lib/postgresql/*/bin``, newest first),
initialises a cluster in a fresh temp directory with trust authentication, and starts
it on a free TCP port of 127.0.0.1 (its Unix socket in the same directory) with
``fsync=on``, so durability tests exercise real flushes. PostgreSQL refuses to run as
root and CI runs as root: then the directory is chowned to the unprivileged
``postgres`` user and both tools run under ``runuser -u postgres``. Each test gets its
own schema (:meth:`PgServer.create_schema`, in one test database: a ``CREATE DATABASE``
per test writes ~8 MB of WAL each, and that I/O slowed the fsync-bound race tests
several-fold) or database (:meth:`PgServer.create_database`); :meth:`PgServer.stop`
shuts the server down (``pg_ctl stop -m fast``) and removes the directory.

``DPLEDGER_TEST_POSTGRES_URL`` (a maintenance URL, e.g. ``postgresql://postgres@host/
postgres``) makes the suite use an existing server instead of starting one.

Startup costs about 1.5 s (``initdb -N`` skips syncing the fresh cluster: it is thrown
away, while the running server keeps ``fsync=on``).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlsplit

import psycopg

__all__ = ["ENV_URL", "PgServer", "PgUnavailable", "find_bindir", "start"]

ENV_URL = "DPLEDGER_TEST_POSTGRES_URL"
_RUN_AS = "postgres"


class PgUnavailable(RuntimeError):
    """No PostgreSQL binaries (or no unprivileged user to run them) on this machine."""


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``; raise :class:`PgUnavailable`."""
    candidates: list[Path] = []
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)

    def version(p: str) -> tuple[int, ...]:
        name = Path(p).parent.parent.name
        return tuple(int(x) for x in name.split(".") if x.isdigit())

    for initdb in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True):
        candidates.append(Path(initdb).parent)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    raise PgUnavailable(
        "no PostgreSQL server binaries (initdb, pg_ctl) on PATH or in "
        "/usr/lib/postgresql/*/bin; install them (`make postgres`, or apt-get install postgresql)"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """A running PostgreSQL server (started here, or an existing one from the env)."""

    host: str
    port: int
    user: str
    maintenance_db: str
    datadir: Path | None = None  # None: not ours to stop
    _runner: list[str] = field(default_factory=list)
    _bindir: Path | None = None
    _databases: list[str] = field(default_factory=list)
    _shared_db: str | None = None

    def url(self, dbname: str, schema: str | None = None) -> str:
        """A libpq URL for database ``dbname`` (with ``search_path`` set to ``schema``)."""
        url = f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}"
        return url if schema is None else f"{url}?options={quote(f'-c search_path={schema}')}"

    def _admin(self, dbname: str | None = None) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url(dbname or self.maintenance_db), autocommit=True)

    def create_database(self) -> str:
        """A fresh, empty database; returns its URL.

        Costs ~0.1 s and ~8 MB of WAL (PostgreSQL copies template1): prefer
        :meth:`create_schema` unless a test needs a database of its own.
        """
        name = f"t_{uuid.uuid4().hex[:16]}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self._databases.append(name)
        return self.url(name)

    def create_schema(self) -> str:
        """A fresh, empty schema in the session's test database; a URL that uses it.

        The URL sets ``search_path`` to the schema (``options=-c search_path=…``), so
        everything a client creates unqualified lands in it. Note that advisory locks
        are per database, so ledgers in sibling schemas share one ledger lock.
        """
        if self._shared_db is None:
            self._shared_db = self.create_database().rsplit("/", 1)[-1]
        name = f"s_{uuid.uuid4().hex[:16]}"
        with self._admin(self._shared_db) as conn:
            conn.execute(f'CREATE SCHEMA "{name}"')
        return self.url(self._shared_db, name)

    def drop(self, url: str) -> None:
        """Drop a database or schema made by :meth:`create_database`/:meth:`create_schema`."""
        parts = urlsplit(url)
        dbname = parts.path.lstrip("/")
        options = dict(parse_qsl(parts.query)).get("options", "")
        if options.startswith("-c search_path="):
            with self._admin(dbname) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{options.split("=", 1)[1]}" CASCADE')
            return
        with self._admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        with contextlib.suppress(ValueError):
            self._databases.remove(dbname)

    def stop(self) -> None:
        """Stop the server if this process started it, and delete its directory."""
        if self.datadir is None:
            for name in list(self._databases):
                with contextlib.suppress(psycopg.Error):
                    self.drop(self.url(name))
            return
        datadir, self.datadir = self.datadir, None
        if self._bindir is not None and (datadir / "postmaster.pid").exists():
            subprocess.run(
                [*self._runner, str(self._bindir / "pg_ctl"), "-D", str(datadir),
                 "-m", "fast", "-w", "stop"],
                check=False, capture_output=True, cwd=datadir.parent,
            )  # fmt: skip
        shutil.rmtree(datadir.parent, ignore_errors=True)


def start() -> PgServer:
    """Start a fresh server (or attach to ``$DPLEDGER_TEST_POSTGRES_URL``).

    Raise :class:`PgUnavailable` when there is nothing to run; a server that exists but
    fails to start raises :class:`RuntimeError` with its log (a failure, not a skip).
    """
    env = os.environ.get(ENV_URL)
    if env:
        info = psycopg.conninfo.conninfo_to_dict(env)
        return PgServer(
            host=str(info.get("host", "127.0.0.1")),
            port=int(info.get("port", 5432)),
            user=str(info.get("user", "postgres")),
            maintenance_db=str(info.get("dbname", "postgres")),
        )
    bindir = find_bindir()
    runner: list[str] = []
    owner: pwd.struct_passwd | None = None
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam(_RUN_AS)
        except KeyError:
            raise PgUnavailable(
                f"running as root and there is no {_RUN_AS!r} user to run PostgreSQL as "
                "(it refuses to run as root)"
            ) from None
        runuser = shutil.which("runuser")
        if runuser is None:
            raise PgUnavailable("running as root and `runuser` is missing")
        runner = [runuser, "-u", _RUN_AS, "--"]
    base = Path(tempfile.mkdtemp(prefix="dpledger-pg-"))
    if owner is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
    base.chmod(0o700)
    datadir = base / "data"
    server = PgServer("127.0.0.1", 0, "postgres", "postgres", datadir, runner, bindir)
    atexit.register(server.stop)  # even if the session dies before its teardown

    def run(*args: str) -> None:
        proc = subprocess.run(
            [*runner, *args], capture_output=True, text=True, cwd=base, check=False
        )
        if proc.returncode != 0:
            log = base / "log"
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({proc.returncode}):\n"
                f"{proc.stdout}\n{proc.stderr}\n{tail}"
            )

    try:
        run(str(bindir / "initdb"), "-D", str(datadir), "-A", "trust", "-U", "postgres",
            "-N", "-E", "UTF8", "--locale=C")  # fmt: skip
        for attempt in range(3):  # a port picked as free can be taken before we bind it
            server.port = _free_port()
            opts = f"-p {server.port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=on"
            try:
                run(str(bindir / "pg_ctl"), "-D", str(datadir), "-o", opts, "-w", "-t", "60",
                    "-l", str(base / "log"), "start")  # fmt: skip
                break
            except RuntimeError:
                if attempt == 2:
                    raise
    except BaseException:
        server.stop()
        raise
    return server
