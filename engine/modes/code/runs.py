"""Naming and addressing code-first runs (seed 001, "Starting and addressing runs").

A run is started with its input and an id of the caller's choosing, and that id is its
identity: the run is ``<definition>/<id>`` (``order-saga/o-42``), so a retried start
joins the run it started (``started`` is then false) and a deterministic id
(``"sale-" + lot``) lets anything address the run without a lookup table. The id is a
non-empty string without ``/``, with the seed's refusal otherwise. ``Client.start``
takes a run's instance id as it is (the studio's start form makes it with ``run_id``),
and ``check_run_instance`` holds it to the same rule.
"""

from __future__ import annotations

from engine.model.errors import InputRefused
from engine.model.identifiers import id_problem

RUN_ID_RULE = "A run id is a non-empty string without '/'."


def run_id(definition: str, id: object) -> str:
    """The instance id of run ``id`` of ``definition``; InputRefused with the seed's text
    for an id that is empty, not a string or holds ``/``, and naming the rule it breaks
    otherwise."""
    if not isinstance(id, str) or not id or "/" in id:
        raise InputRefused(RUN_ID_RULE)
    instance = f"{definition}/{id}"
    if problem := id_problem(instance):
        raise InputRefused(f"the run id {definition}/{id} {problem}")
    return instance


def check_run_instance(definition: str, instance_id: str) -> None:
    """Refuse ``instance_id`` for a start of code workflow ``definition`` unless it is
    the instance id of one of its runs, ``<definition>/<id>`` with ``id`` as ``run_id``
    takes it: a start by instance id follows the rule a start by run id does."""
    prefix = f"{definition}/"
    if not instance_id.startswith(prefix):
        raise InputRefused(
            f"a run of code workflow {definition} has the instance id {prefix}ID: "
            f"start it with start_run({definition!r}, input, id=ID)"
        )
    run_id(definition, instance_id.removeprefix(prefix))
