"""How one studio process is configured."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from engine import DEFAULT_SCHEMA, ActivityRegistry
from studio.accounts.passwords import Argon2Cost
from studio.accounts.signin_limits import SignInLimits
from studio.trace_links import TRACE_URL_ENV, trace_url_problem

MAX_BODY_BYTES = 4_000_000
"""The largest request body the studio reads (a definition, a draft, an input); larger
is refused with 413 before it is parsed."""
BODY_TOO_LARGE = f"the request body is larger than the {MAX_BODY_BYTES:,} bytes allowed"


@dataclass(frozen=True)
class StudioSettings:
    dsn: str
    schema: str = DEFAULT_SCHEMA
    read_dsn: str = ""
    """A replica the list, instance, history and drill-report pages read from
    (``studio.reads``); empty: they read the primary like everything else."""
    secure_cookies: bool = False
    """The studio is served over HTTPS: cookies are marked Secure and every response
    carries ``Strict-Transport-Security`` (``studio.security_headers``); turn on whenever
    the studio is served over HTTPS."""
    session_ttl: timedelta = timedelta(hours=12)
    signin_limits: SignInLimits = field(default_factory=SignInLimits)
    trusted_proxies: tuple[str, ...] = ()
    """Addresses or networks of reverse proxies whose ``X-Forwarded-For`` is believed when
    counting sign-in attempts per address; by default none (the header is ignored)."""
    password_cost: Argon2Cost = field(default_factory=Argon2Cost)
    worker_activities: ActivityRegistry | None = None
    """When set, the studio runs a worker for these activities in its own process."""
    worker_id: str = ""
    live_interval: timedelta = timedelta(seconds=1)
    """How often live instance pages look for change (one shared query per interval);
    zero turns live updates off (pages then offer a refresh link)."""
    live_stream_limit: timedelta = timedelta(minutes=10)
    """A live stream ends after this long; the browser reconnects where it left off."""
    drill_artifacts: Path | None = None
    """Where drill campaigns keep logs and their replay corpus (default: the temp dir)."""
    trace_url: str = field(default_factory=lambda: os.environ.get(TRACE_URL_ENV, ""))
    """A tracing UI's address of one trace, with ``{trace_id}``: instance pages link to
    their trace there (``studio.trace_links``); none when empty."""

    @property
    def poll_interval(self) -> timedelta:
        """How often the watcher of followed instances polls (a second when live
        updates are off: it then follows nothing anyway)."""
        return self.live_interval or timedelta(seconds=1)

    def __post_init__(self) -> None:
        if problem := trace_url_problem(self.trace_url):
            raise ValueError(problem)
