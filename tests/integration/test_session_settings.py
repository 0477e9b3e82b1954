"""Every engine session runs without JIT compilation, whatever the server's default: a
claim compiled on every execution costs tens of milliseconds (issue 25, 10^7 history
rows), and a session option outranks the server's, a database's and a role's setting."""

from __future__ import annotations

from engine.store.store import Store


async def test_engine_sessions_never_jit_compile(db_store: Store) -> None:
    async with db_store.reading() as conn:
        found = await (await conn.execute("SELECT current_setting('jit')")).fetchone()
    assert found == ("off",)
