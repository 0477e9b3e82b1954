"""Code runs are migrated from the command line, where the team's code is loaded.

A code run moves to another version only if its journal replays, command for command,
against that version's code (``engine.modes.code.replay_gate``), and the studio never
imports a team's code: its judge refuses every code run, whose code "is not loaded
here". ``wayline instance migrate --app MODULE:APP`` loads it. So wherever the studio
offers or refuses a migration, a code run is not offered and its refusal says how it
is migrated (``said``: the bulk and migration previews, a bulk's results, the API's
answers), and the pages give each such run its command (``command``): its id, the
version, the module of that version's code (``APP`` stands for the name of the
ActivityRegistry in it, which the studio cannot know), the team, the person, the
studio's schema unless it is the default, and ``REASON`` for theirs to write.
"""

from __future__ import annotations

import shlex
from collections.abc import Collection, Iterable

from engine import DEFAULT_SCHEMA
from engine.decide.previews import Preview
from engine.model.compatibility import Verdict
from engine.model.definitions import Definition
from engine.modes.code.document import CodeManifest
from engine.modes.code.replay_gate import NOT_LOADED
from studio.principal import Principal
from studio.runtime import Runtime

APP = "APP"
"""Stands in the command for the name of the team's ActivityRegistry in the module."""
REASON = "REASON"
HOW = (
    "the studio does not load a team's code: a code run is migrated with `wayline "
    "instance migrate ID --to VERSION --app MODULE:APP`, where its code is loaded"
)


def said(reason: str) -> str:
    """``reason`` (a verdict or a result) with ``HOW`` after it when it says that a
    run's code is not loaded here."""
    return f"{reason}; {HOW}" if NOT_LOADED in reason and HOW not in reason else reason


def command(instance_id: str, target: Definition, principal: Principal, schema: str) -> str:
    """The command that migrates the code run ``instance_id`` (its stored id) to
    ``target``, a code workflow's version, as ``principal`` ('' when ``target`` is not
    one)."""
    if not isinstance(target.manifest, CodeManifest):
        return ""
    app = f"{target.manifest.module}:{APP}"
    words = ["wayline", "instance", "migrate", instance_id, "--to", target.version, "--app", app]
    words += ["--team", principal.team_id] if principal.team_id else []
    words += ["--schema", schema] if schema != DEFAULT_SCHEMA else []
    return shlex.join([*words, "--actor", principal.actor, "--reason", REASON])


async def for_previews(
    runtime: Runtime, principal: Principal, previews: Iterable[Preview]
) -> dict[str, str]:
    """By id, the command for each code run a migration's ``previews`` refuse for its
    code (none for a preview of another action)."""
    registry = await runtime.client.registries.get()
    targets = {
        p.instance_id: registry.get(p.definition.name, str(p.request.effect["version"]))
        for p in previews
        if not p.applies and NOT_LOADED in p.reason and p.request.effect.get("version")
    }
    return _commands(runtime, principal, {run: t for run, t in targets.items() if t})


def for_report(
    runtime: Runtime,
    principal: Principal,
    target: Definition,
    verdicts: Iterable[Verdict],
    declared: Collection[str],
) -> dict[str, str]:
    """The command for each run of a version's compatibility report that could move to
    it (``target``, a code workflow's version; none for another kind): from a version
    with a declared edge, and judged compatible or not judged for want of its code."""
    movable = [
        v.instance_id
        for v in verdicts
        if v.from_version in declared and (v.compatible or NOT_LOADED in v.reason)
    ]
    return _commands(runtime, principal, dict.fromkeys(movable, target))


def _commands(
    runtime: Runtime, principal: Principal, targets: dict[str, Definition]
) -> dict[str, str]:
    """By run, its command to move to its target, for each whose target is code."""
    schema = runtime.settings.schema
    found = {run: command(run, target, principal, schema) for run, target in targets.items()}
    return {run: line for run, line in found.items() if line}
