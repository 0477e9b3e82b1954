"""What ``Store.open`` raises for a setup mistake is a public Wayline error.

A service that embeds the engine catches ``engine.WaylineError`` around its setup; a
schema that was never migrated used to escape it as a MigrationError outside that
hierarchy (and not importable from ``engine``), a bad schema name as a bare ValueError.
"""

from __future__ import annotations

import pytest

import engine
from engine import InputRefused, SchemaBehindError, Store, WaylineError, apply_migrations


async def test_a_schema_never_migrated_is_a_wayline_error_saying_what_to_do(
    pg_dsn: str, schema_name: str
) -> None:
    with pytest.raises(WaylineError) as raised:
        await Store.open(pg_dsn, schema_name)
    assert isinstance(raised.value, SchemaBehindError)
    assert "holds no Wayline tables: run `wayline migrate`" in str(raised.value)


@pytest.mark.parametrize("name", ["Bad-Schema", 5])
async def test_a_bad_schema_name_is_input_refused_saying_what_is_allowed(
    pg_dsn: str, name: object
) -> None:
    with pytest.raises(InputRefused, match="use 1-63 characters from a-z, 0-9 and _"):
        await Store.open(pg_dsn, name)  # type: ignore[arg-type]


def test_the_errors_the_client_documents_are_importable_from_engine() -> None:
    for name in ("InstanceNotFound", "CommandConflict", "SchemaBehindError", "MigrationError"):
        assert issubclass(getattr(engine, name), WaylineError), name


async def test_a_conninfo_that_is_not_a_str_is_input_refused_naming_only_its_type() -> None:
    secret = {"password": "s3cret"}
    with pytest.raises(InputRefused, match=r"^the conninfo must be a str .*, not dict$") as raised:
        await Store.open(secret, "wayline")  # type: ignore[arg-type]
    assert "s3cret" not in str(raised.value)
    with pytest.raises(InputRefused, match=r"^the conninfo must be a str"):
        apply_migrations(5, "wayline")  # type: ignore[arg-type]
