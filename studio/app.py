"""The studio's Litestar application: ``create_app(settings)``.

The app opens one engine Store (a connection pool on the schema, refusing a schema
that is behind its migrations) at startup and closes it at shutdown; when the settings
name an activity registry it also runs a worker for it in the same event loop, which
is how ``wayline studio`` gives a zero-setup studio that can run the examples.
"""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import timedelta
from pathlib import Path

from litestar import Litestar
from litestar.datastructures import State
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin
from litestar.static_files import create_static_files_router

from engine import Store, Worker, WorkerConfig
from studio.accounts import passwords, signin_limits
from studio.dependencies import DEPENDENCIES
from studio.failures import handle_error
from studio.input_checks import InputChecks, check_request_fields
from studio.observability import CallerTrace, RequestLatencies
from studio.query_params import record_query_names
from studio.read_lag import add_read_lag_header
from studio.reads import Reads
from studio.rendering import template_config
from studio.request_bodies import close_request_schemas
from studio.routes import route_handlers
from studio.runtime import Runtime
from studio.security_headers import security_headers
from studio.settings import MAX_BODY_BYTES, StudioSettings

STATIC = Path(__file__).resolve().parent.parent / "static"


def create_app(settings: StudioSettings) -> Litestar:
    """A studio on the database and schema named by ``settings``."""
    passwords.configure(settings.password_cost)
    trusted_proxies = signin_limits.trusted_networks(settings.trusted_proxies)
    stop = asyncio.Event()
    running: list[asyncio.Task[None]] = []
    latencies = RequestLatencies()

    async def start(app: Litestar) -> None:
        app.state.store = await Store.open(settings.dsn, settings.schema)
        app.state.runtime = Runtime.on(app.state.store, settings)
        app.state.replica = None
        if settings.read_dsn:
            replica = await Store.open(settings.read_dsn, settings.schema, read_only=True)
            app.state.replica = Reads.replica(
                replica, app.state.runtime.client.registries, settings.poll_interval
            )
        if settings.worker_activities is not None:
            stop.clear()
            config = WorkerConfig(
                worker_id=settings.worker_id or f"studio-{socket.gethostname()}-{os.getpid()}",
                lease=timedelta(seconds=30),
                poll_interval=timedelta(milliseconds=500),
            )
            worker = Worker(app.state.store, settings.worker_activities, config)
            running.append(asyncio.create_task(worker.run(stop)))

    async def finish(app: Litestar) -> None:
        stop.set()
        await app.state.runtime.close()
        for task in running:
            await task
        running.clear()
        if app.state.replica is not None:
            await app.state.replica.close_replica()
        await app.state.store.close()

    return Litestar(
        route_handlers=[
            *route_handlers(),
            create_static_files_router(path="/static", directories=[STATIC]),
        ],
        dependencies=DEPENDENCIES,
        on_startup=[close_request_schemas, record_query_names, start],
        on_shutdown=[finish],
        state=State(
            {
                "settings": settings,
                "trusted_proxies": trusted_proxies,
                "request_latencies": latencies,
            }
        ),
        template_config=template_config(),
        exception_handlers={Exception: handle_error},
        openapi_config=OpenAPIConfig(
            title="Wayline studio API",
            version="1",
            path="/schema",
            render_plugins=[JsonRenderPlugin()],
            description="Everything the studio's pages do, for scripts and CI. Authenticate "
            "with an API token: `Authorization: Bearer wl_...`.",
        ),
        middleware=[latencies, CallerTrace(), InputChecks()],
        before_request=check_request_fields,
        before_send=[security_headers(settings.secure_cookies), add_read_lag_header],
        request_max_body_size=MAX_BODY_BYTES,
        logging_config=None,
    )
