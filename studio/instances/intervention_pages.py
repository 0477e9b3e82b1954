"""Operator actions and signals on the instance page.

An action is two steps, both on the server: asking for it shows what it would do (the
dry run's effect and the events it would record, from ``studio.instances.action_offers``) with a
required reason and a fresh command id; confirming posts that form. Without
JavaScript both are whole pages and the post redirects back to the instance (a refused
signal is the instance page again, the refusal in the signal's form); with
htmx the confirmation opens in the action panel and the answer replaces the panel with
what was recorded, plus every part of the page that changed (the audit trail among
them) as out-of-band swaps, so the audit row is there at once. A refused action (no
reason, or the state moved on) shows the form again with the reason it was refused.
"""

from __future__ import annotations

import json
from typing import Any

from litestar import Request, Response
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery
from litestar.response import Template
from markupsafe import Markup

from engine.decide.operator_actions import Action
from studio.errors import StudioError
from studio.forms import REFUSALS, again, beside
from studio.instance_urls import instance_id_of, instance_url
from studio.instances import detail as instance_detail
from studio.instances import interventions
from studio.instances.action_offers import KINDS, RESOLUTIONS, offer
from studio.instances.detail import InstanceDetail
from studio.instances.interventions import CommandForm, new_id, parse_action
from studio.instances.pages import refused_page
from studio.instances.sections import node_updates, render_sections
from studio.principal import Principal
from studio.rendering import (
    form_values,
    fragment,
    is_htmx,
    page,
    see_other,
)
from studio.runtime import Runtime


async def confirm_action(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    ref: FromPath[str],
    action: FromPath[str],
    step: FromQuery[str] = "",
) -> Template:
    """What the action would do, and the form that does it."""
    action_kind = parse_action(action)
    return await _confirm(request, principal, runtime, instance_id_of(ref), action_kind, step, {})


async def _confirm(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    instance_id: str,
    action: Action,
    step: str,
    values: dict[str, str],
    error: str = "",
    status: int = 200,
    field_errors: dict[str, str] | None = None,
) -> Template:
    """The confirmation: in the instance page's action panel (htmx), or a whole page of
    its own (opened in a tab of its own, after signing in again, without JavaScript),
    whose form then posts natively, since that page has no panel to answer into. A
    refusal is said beside the field it concerns (``field_errors``), above the form
    only when it concerns none of them (the instance's state moved on)."""
    detail = await instance_detail.detail(runtime.primary, principal.team_id, instance_id)
    registry = await runtime.client.registries.get()
    offered = offer(detail.state, registry, runtime.store.now(), action, step)
    if offered is None and not error:
        error = f"{KINDS[action].label} {step} is not possible in the instance's state now."
        status = 409
    in_panel = is_htmx(request)
    template = "instances/_confirm.html" if in_panel else "instances/confirm.html"
    return page(
        request,
        template,
        "instances",
        status=status,
        d=detail,
        action=action,
        kind=KINDS[action],
        step=step,
        offered=offered,
        error=error,
        field_errors=field_errors or {},
        in_panel=in_panel,
        values=values,
        command_id=values.get("command_id") or new_id(),
        resolutions=RESOLUTIONS,
        choices=offered.resolutions if offered is not None else {},
    )


async def do_action(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    ref: FromPath[str],
    action: FromPath[str],
) -> Response:
    instance_id = instance_id_of(ref)
    action_kind = parse_action(action)
    values = await form_values(request)
    fields = {k: v for k, v in values.items() if k in CommandForm.__dataclass_fields__}
    form = CommandForm(**{**fields, "action": action, "reason": values.get("reason", "")})
    try:
        await interventions.command(runtime, principal.team_id, principal.actor, instance_id, form)
    except REFUSALS as refused:  # the form again (for htmx, in its panel), as typed
        shown = again(refused, values) | {"field_errors": beside(refused)}
        return await _confirm(
            request, principal, runtime, instance_id, action_kind, form.step, **shown
        )
    label = f"{KINDS[action_kind].label} {form.step}".strip()
    return await _after(
        request, principal, runtime, instance_id, f"{label}: recorded with your reason.", "audit"
    )


async def send_signal(
    request: Request,
    principal: NamedDependency[Principal],
    runtime: NamedDependency[Runtime],
    ref: FromPath[str],
    step: FromPath[str],
) -> Response:
    instance_id = instance_id_of(ref)
    values = await form_values(request)
    try:
        signal = interventions.CommandForm(
            Action.SIGNAL.value,
            values.get("reason", ""),
            step,
            values.get("signal_id", ""),
            values.get("payload", ""),
        )
        await interventions.send_signal(
            runtime, principal.team_id, principal.actor, instance_id, signal
        )
    except StudioError as refused:
        return await _signal_refused(request, principal, runtime, instance_id, step, refused)
    return await _after(
        request,
        principal,
        runtime,
        instance_id,
        f"Signal {step} delivered: recorded with your reason.",
        "signals",
    )


async def _signal_refused(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    instance_id: str,
    step: str,
    refused: StudioError,
) -> Response:
    """A refused signal's form again in its place (htmx is told to swap it there), each
    problem beside its field and what was typed kept; a refusal no form could fix (the
    step no longer takes a signal) is said in the action panel, as before. Posted
    without htmx, the answer is the instance page showing the same."""
    detail = await instance_detail.detail(runtime.primary, principal.team_id, instance_id)
    slot = next((s for s in detail.signal_slots if s.name == step), None)
    htmx = is_htmx(request)
    if slot is None or not isinstance(refused, REFUSALS):
        notice = fragment(request, "instances/_notice.html", error=str(refused))
        if not htmx:
            return await refused_page(
                request, principal, runtime, detail, refused.status, panel_notice=notice
            )
        return Response(notice, media_type="text/html", status_code=refused.status)
    values = await form_values(request)
    shown = {"step": step, "error": str(refused), "at": beside(refused), "typed": values}
    if not htmx:
        return await refused_page(
            request, principal, runtime, detail, refused.status, signal_refused=shown
        )
    form = fragment(
        request,
        "instances/_signal_form.html",
        slot=slot,
        url=instance_url(instance_id),
        signal_refused=shown,
    )
    retarget = {"HX-Retarget": f'[id="signal-form-{_css_string(step)}"]', "HX-Reswap": "outerHTML"}
    return Response(form, media_type="text/html", status_code=refused.status, headers=retarget)


def _css_string(text: str) -> str:
    """``text`` as the inside of a quoted CSS string (a step name in a selector)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


async def _after(
    request: Request,
    principal: Principal,
    runtime: Runtime,
    instance_id: str,
    message: str,
    anchor: str,
) -> Response:
    """The page again (a redirect), or for htmx the notice and every changed part."""
    if not is_htmx(request):
        return see_other(instance_url(instance_id) + f"#instance-{anchor}")
    detail = await instance_detail.detail(runtime.primary, principal.team_id, instance_id)
    return Response(_answer(request, detail, message), media_type="text/html", status_code=200)


def _answer(request: Request, detail: InstanceDetail, message: str) -> Markup:
    notice = fragment(
        request,
        "instances/_notice.html",
        message=message,
        nodes=json.dumps(node_updates(detail)),
        sequence=detail.state.sequence,
    )
    parts: list[Any] = [notice, *(s.html for s in render_sections(request, detail, True).values())]
    return Markup("").join(parts)
