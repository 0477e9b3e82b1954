"""Step lists, the first definition mode: ordered steps of eight kinds (README,
"Definition format"), run as an ``orchestration`` the engine walks step by step, or as
a ``choreography`` that events supplied from outside advance (the engine never decides
for it). Both share everything else: the validation of their steps, the fold rules of
their events, the work a worker runs for them and the studio's drawing.
"""

from __future__ import annotations

from dataclasses import replace

from engine.decide.child_cascade import end_children
from engine.model.definitions import Mode
from engine.modes import DefinitionMode
from engine.modes.steps import compatibility, fold, orchestration, validation, work

ORCHESTRATION = DefinitionMode(
    name=Mode.ORCHESTRATION,
    fields=validation.FIELDS,
    read=validation.read,
    check=validation.check_structure,
    fold=fold.RULES,
    decide=orchestration.decide,
    work=work.PROCESSORS,
    judge=compatibility.judge,
    propagate=end_children,
)
CHOREOGRAPHY = replace(ORCHESTRATION, name=Mode.CHOREOGRAPHY, decide=None)
