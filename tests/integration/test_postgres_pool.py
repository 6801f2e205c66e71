"""The PostgreSQL log's pool lends a connection unchecked when it came back moments ago
(the check was a round trip on every borrow), checks one that sat idle, and a read that
meets a connection the server dropped meanwhile runs again on a fresh one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.postgres

psycopg = pytest.importorskip("psycopg")
from psycopg_pool import ConnectionPool  # noqa: E402

from memray.store.postgres_log import PostgresEventLog  # noqa: E402


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    seen: list[Any] = []
    real = ConnectionPool.check_connection

    def counted(conn: Any) -> None:
        seen.append(conn)
        real(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
    return seen


def opened(dsn: str, idle_s: float) -> Iterator[PostgresEventLog]:
    log = PostgresEventLog(dsn, dim=4, pool_size=4, check_after_idle_s=idle_s)
    log.open()
    try:
        yield log
    finally:
        log.close()


@pytest.fixture
def log(fresh_postgres_dsn: str, request: pytest.FixtureRequest) -> Iterator[PostgresEventLog]:
    yield from opened(fresh_postgres_dsn, request.param)


def drop_connections(dsn: str) -> int:
    """Ends every other session on the log's database, as a server restart would."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                             ).fetchall()
    return len(rows)


@pytest.mark.parametrize("log", [3600.0], indirect=True)
def test_back_to_back_reads_borrow_without_a_check(log: PostgresEventLog,
                                                   checks: list[Any]) -> None:
    for _ in range(20):
        assert log.version("u") == 0
    # One connection served them all (each went straight back to the pool, no worker
    # thread in between), checked once as new and never again.
    assert len(checks) == 1


@pytest.mark.parametrize("log", [0.0], indirect=True)
def test_a_connection_idle_past_the_bound_is_checked(log: PostgresEventLog,
                                                     checks: list[Any]) -> None:
    for _ in range(5):
        log.version("u")
    assert len(checks) >= 5


@pytest.mark.parametrize("log", [3600.0, 0.0], indirect=True)
def test_a_read_after_the_server_dropped_the_connections_succeeds(
        log: PostgresEventLog, fresh_postgres_dsn: str) -> None:
    # 3600: lent unchecked, the read fails once and runs again; 0: the check finds it.
    assert log.version("u") == 0
    with log.user_lock("a"), log.user_lock("b"):  # two pooled connections now
        assert log.version("u") == 0
    assert drop_connections(fresh_postgres_dsn) >= 2
    # The retry finds the next pooled connection dead too unless it checks it.
    assert log.version("u") == 0
    assert log.versions() == {}
