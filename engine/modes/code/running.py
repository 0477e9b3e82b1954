"""The code-first mode as the engine runs it: ``CODE`` (declaring and publishing) plus
the fold of its history, the decisions that need no code, its inbox of signals, the
work that replays the code (``WorkKind.DECISION``) and the step bodies it runs as
attempts.

Kept apart from ``engine.modes.code`` because these import the step lists' rules and
the worker, which import the declaration (``ActivityRegistry.workflow``): ``engine``
installs this one."""

from __future__ import annotations

from dataclasses import replace

from engine.decide.child_cascade import end_children
from engine.model.transitions import WorkKind
from engine.modes.code import CODE, decide, fold, replay_gate, signals
from engine.modes.code.effects import run_effect
from engine.modes.code.processor import process_decision

CODE_RUNNING = replace(
    CODE,
    fold=fold.RULES,
    decide=decide.decide,
    accept_signal=signals.accept_signal,
    propagate=end_children,
    work={WorkKind.DECISION: process_decision},
    effect=run_effect,
    judge=replay_gate.judge,
)
