"""Rendering a scorecard (``verification.scorecard.build``) as text and as JUnit XML.

The text is for CI logs and the studio; its last line is exactly
``drills: N passed, N failed``. JUnit XML gives CI one test case per drill, failures
carrying the reproduction command, drills not run as skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from typing import Any
from xml.etree import ElementTree

from engine.model.words import counted
from verification.scorecard import ACTIONS, ANCHORS, SHORT


def text(card: dict[str, Any], listed: Collection[str] = ()) -> str:
    """The scorecard; a failed drill in ``listed`` (its findings printed above it, as
    a plan's section prints them) is named with its seed and reproduction, not its
    findings again."""
    lines = [_identity(card), *_body(card), *_failures(card, listed), *_not_run(card)]
    summary = card["summary"]
    lines.append(f"drills: {summary['passed']} passed, {summary['failed']} failed")
    return "\n".join(lines)


def _n(value: int) -> str:
    return f"{value:,}"


def _effects(workload: dict[str, Any]) -> str:
    """How many handlers were called and effects applied, counting only the calls the
    drill sees (its stubs'): a team's own handler, or a step body of its code-first
    workflow, makes its effect in the team's system, unseen here."""
    called = f"effects called {_n(workload['effect_calls'])}"
    bodies = workload.get("code_bodies_entered", 0)  # absent from older scorecards
    if bodies:
        called += f" (+ your code's step bodies entered {_n(bodies)})"
    unseen = workload.get("effect_calls_unseen", 0)
    if unseen == workload["effect_calls"] and (unseen or bodies):
        return f"{called} applied: not seen (your {'handlers' if unseen else 'code'})"
    applied = f"applied {_n(workload['effects_applied'])}"
    return f"{called} {applied}" + (
        f" (+ {_n(unseen)} calls of your handlers: not seen)" if unseen else ""
    )


def _identity(card: dict[str, Any]) -> str:
    i = card["identity"]
    head = (
        f"== wayline drill campaign {i['campaign']}  sha {i['git_sha']}  pg {i['postgres']}  "
        f"py {i['python']}  {i['cores']} cores/{i['ram_gib']} GiB  profile={i['profile']}  "
        f"target={i['target']}{'  mutant=' + i['mutant'] if i['mutant'] else ''} =="
    )
    families = Counter(d["family"] for d in card["drills"])
    mix = ", ".join(f"{f} {n}" for f, n in sorted(families.items(), key=_family_order))
    return (
        f"{head}\nseed {i['seed']}   wall {i['wall_seconds']:.0f} s   "
        f"drills {len(card['drills'])} ({mix})"
    )


def _family_order(item: tuple[str, int]) -> tuple[int, str]:
    family = item[0]
    return (int(family[1:]) if family[1:].isdigit() else 99, family)


def _continued(workload: dict[str, Any]) -> str:
    """``  (+ N continued as new)`` after the runs that completed, when runs continued
    as new (each is carried on by its successor, counted where its chain ended); '' for
    none, and for a scorecard older than continuations."""
    continued = workload.get("continued_as_new", 0)
    return f" (+ {_n(continued)} continued as new)" if continued else ""


def _body(card: dict[str, Any]) -> list[str]:
    w, a, le, r, rp, p, c = (
        card[k]
        for k in ("workload", "ambiguity", "leases", "recovery", "replay", "property", "cost")
    )
    lines = [
        f"workload   started {_n(w['started'])}  acked {_n(w['acknowledged'])}  completed "
        f"{_n(w['completed'])}{_continued(w)}  failed {_n(w['failed'])}  dead-lettered "
        f"{_n(w['dead_lettered'])}  checkpoints {_n(w['checkpoints'])}  events {_n(w['events'])}",
        f"           signals sent {_n(w['signals_sent'])} accepted {_n(w['signals_accepted'])} "
        f"deduplicated {_n(w['signals_deduplicated'])}  {_effects(w)}  work items "
        f"{_n(w['work_items'])}",
        *_fault_table(card["faults"]),
        "env        " + ("  ".join(f"{k} {v}" for k, v in card["environment"].items()) or "none"),
        f"ambiguous  commits {a['ambiguous_commits']}  -> committed {a['committed']}  aborted "
        f"{a['aborted']}  unknown {a['unknown']}   engine settled: committed "
        f"{a['engine_settled_committed']} aborted {a['engine_settled_aborted']} "
        f"(taken by another {a['engine_settled_conflicting']}) unknown {a['engine_left_unknown']} "
        f"(resolved later: committed {a['resolved_later_committed']} aborted "
        f"{a['resolved_later_aborted']}); by ending the session of a lone write "
        f"{a['engine_settled_by_session']}",
        f"leases     claims {_n(le['claims'])}  takeovers {_n(le['takeovers'])}  stale writes "
        f"attempted {le['stale_writes_attempted']}  rejected {le['stale_writes_rejected']}  "
        f"ACCEPTED {le['stale_writes_accepted']}  racing claims {le['racing_claims']}",
        f"recovery   faults {r['faults']}  time-to-recover p50 {r['p50']} s  p95 {r['p95']} s  "
        f"max {r['max']} s  sweeps {r['recovery_sweeps']}  stranded-after-quiet "
        f"{r['stranded_after_quiet']}",
        *_failover_lines(card.get("failover", {})),
        *_invariant_lines(card["invariants"]),
        f"replay     histories {_n(rp['histories'])}  events replayed "
        f"{_n(rp['events_replayed'])}  clean NDE {rp['clean_nondeterminism']}  snapshot paths "
        f"{_n(rp.get('snapshot_paths_checked', 0))}  mutants "
        f"{rp['mutants_injected']} detected {rp['mutants_detected']} "
        f"({rp['kill_rate'] if rp['kill_rate'] is not None else '-'}%)",
        f"hypothesis examples {p['examples']}  steps {p['steps']}  shrinks {p['shrinks']}  "
        f"failing blobs {len(p['failing_blobs'])}",
        f"perf       instances/s under fault {c['instances_per_second_under_fault'] or '-'} "
        f"(no-fault {c['instances_per_second_no_fault'] or '-'})",
        f"anchors    {ANCHORS[0]}",
        f"           {ANCHORS[1]}",
    ]
    return lines


def _fault_table(faults: dict[str, Any]) -> list[str]:
    header = "faults     " + f"{'boundary':<20}" + "".join(f"{SHORT[a.value]:>11}" for a in ACTIONS)
    lines = [header + f"{'reached-runs':>14}  (fired/planned)"]
    for boundary, cells in faults["per_boundary"].items():
        row = "".join(
            f"{c['fired']}/{c['planned']}".rjust(11) for c in (cells[a.value] for a in ACTIONS)
        )
        reached = faults["reached_runs"].get(boundary, 0)
        lines.append(f"           {boundary:<20}{row}{reached:>14}")
    never = ", ".join(faults["never_reached"]) or "-"
    lines.append(f"           never reached: {never}")
    return lines


def _failover_lines(failover: dict[str, Any]) -> list[str]:
    """Only when failover drills ran: time to resume, answers lost, and the findings."""
    if not failover.get("drills"):
        return []
    resume = failover["time_to_resume_max"]
    lines = [
        f"failover   drills {failover['drills']}  time-to-resume max "
        f"{'-' if resume is None else f'{resume} s'}  commits in flight "
        f"{failover['commits_in_flight']} (settled {failover['ambiguous_commits']})  "
        "acknowledged then lost (asynchronous standby) "
        f"{failover['acknowledged_lost']}"
    ]
    lines.extend(f"finding    {finding}" for finding in failover["findings"])
    return lines


def _invariant_lines(invariants: dict[str, Any]) -> list[str]:
    """checked/violations of each invariant the drills exercised, four to a line; then
    one line for each they did not, saying why, never a 0/0 that reads as passed."""
    cells = [
        f"{k} {v['name']} {_n(v['checked'])}/{v['violations']}"
        for k, v in invariants.items()
        if not v.get("not_exercised")  # absent from older scorecards
    ]
    lines = []
    for start in range(0, len(cells), 4):
        prefix = "invariants " if start == 0 else "           "
        lines.append(prefix + "  ".join(cells[start : start + 4]))
    for key, value in invariants.items():
        if value.get("not_exercised"):
            prefix = "invariants " if not lines else "           "
            lines.append(f"{prefix}{key} {value['name']} not exercised: {value['not_exercised']}")
    for key, value in invariants.items():
        if value["first"]:
            first = value["first"]
            lines.append(
                f"           first {key} violation: {first['drill']} seed {first['seed']}: "
                f"{first['what']} ({first['artifacts']})"
            )
    return lines


def _failures(card: dict[str, Any], listed: Collection[str] = ()) -> list[str]:
    lines = []
    for drill in card["drills"]:
        if drill["verdict"] != "failed":
            continue
        tag = f" [known engine bug {drill['known_bug']}]" if drill["known_bug"] else ""
        head = f"FAILED     {drill['id']}{tag} seed {drill['seed']}: "
        if drill["id"] in listed:
            lines.append(head + f"{counted(len(drill['failures']), 'finding')}, listed above")
        else:
            lines.append(head + drill["failures"][0])
            lines.extend(f"             {f}" for f in drill["failures"][1:4])
        lines.append(f"           reproduce: {drill['reproduce']}")
    for bug in card["known_bugs"]:
        lines.append(
            f"known bug  {bug['id']}: {bug['title']} ({bug['where']}); drills: "
            f"{', '.join(bug['drills'])}"
        )
    return lines


def _not_run(card: dict[str, Any]) -> list[str]:
    return [
        f"NOT RUN    {d['id']}: {d['failures'][0]}"
        for d in card["drills"]
        if d["verdict"] == "not_run"
    ]


def junit(card: dict[str, Any]) -> str:
    """One <testcase> per drill; failures carry the reproduction command."""
    summary = card["summary"]
    suite = ElementTree.Element(
        "testsuite",
        name=f"wayline drills {card['identity']['profile']}",
        tests=str(len(card["drills"])),
        failures=str(summary["failed"]),
        skipped=str(summary["not_run"]),
        time=str(card["identity"]["wall_seconds"]),
    )
    for drill in card["drills"]:
        case = ElementTree.SubElement(
            suite, "testcase", classname=f"drills.{drill['family']}", name=drill["id"],
            time=str(drill["seconds"]),
        )  # fmt: skip
        if drill["verdict"] == "failed":
            failure = ElementTree.SubElement(case, "failure", message=drill["failures"][0][:500])
            failure.text = "\n".join([*drill["failures"], f"reproduce: {drill['reproduce']}"])
        elif drill["verdict"] == "not_run":
            ElementTree.SubElement(case, "skipped", message=drill["failures"][0])
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)
