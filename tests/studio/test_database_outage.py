"""The studio while its database is down, and after: health answers, readiness says why
not, a person's page and a script's call say the database is not answering (503, with
when to try again) instead of a server error, and both are served again once it is
back. A real private cluster, stopped and started again on its port."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from engine import EmbeddedPostgres
from studio.accounts import api_tokens, people
from studio.api_responses import DATABASE_UNAVAILABLE
from studio.failures import RETRY_AFTER_SECONDS
from studio.roles import Role
from tests.integration.conftest import cluster  # noqa: F401
from tests.studio.live import LiveStudio, serve_studio


def _token(studio: LiveStudio, team: str) -> str:
    """A viewer's API token, made by an admin of ``team`` (a token lasts while its maker
    may grant it)."""
    admin = studio.user(team, Role.ADMIN)
    admin_id = studio.run(lambda store: people.find_login(store, admin))[0].user_id
    secret, _ = studio.run(
        lambda store: api_tokens.create_token(store, team, Role.VIEWER, "outage", admin, admin_id)
    )
    return secret


def test_the_studio_says_the_database_is_not_answering_and_serves_again_once_it_is_back(
    cluster: EmbeddedPostgres,  # noqa: F811
) -> None:
    with serve_studio(cluster.start()) as studio:
        team = studio.team("outage")
        person = studio.client(studio.user(team, Role.VIEWER))
        script = studio.client()
        script.headers["Authorization"] = f"Bearer {_token(studio, team)}"
        assert person.get("/definitions").status_code == 200
        assert script.get("/api/instances").status_code == 200

        cluster.stop()
        assert (person.get("/healthz").status_code, person.get("/healthz").text) == (200, "ok\n")
        ready = person.get("/readyz")
        assert (ready.status_code, ready.text) == (503, "the database is not reachable\n")
        with ThreadPoolExecutor(2) as both:  # each waits out the pool's wait for a connection
            page, call = both.map(lambda get: get(), (
                lambda: person.get("/definitions"), lambda: script.get("/api/instances"),
            ))  # fmt: skip
        assert page.status_code == 503
        assert DATABASE_UNAVAILABLE in page.text
        assert "something went wrong" not in page.text
        assert call.status_code == 503
        assert call.json() == {"error": DATABASE_UNAVAILABLE, "problems": []}
        assert call.headers["retry-after"] == str(RETRY_AFTER_SECONDS)

        cluster.start()
        assert person.get("/definitions").status_code == 200
        assert script.get("/api/instances").status_code == 200
        assert person.get("/readyz").status_code == 200
