"""A battle's ``history.json`` body, without dumping again the iterations already dumped.

Every save of a battle used to dump the whole record on the event loop, every iteration
of it: at the 50th iteration 0.34 ms a save, twice an iteration, growing with the battle.
An iteration's record is not changed once it is in the battle (its run is over), so its
dump is kept and reused, keyed by the record itself; assigning a field of the record (a
new object for one of its values) is noticed and the record dumped again. Only a change
made inside one of its values in place (appending to its list of files) would not be:
nothing does that, and the tests run with :data:`CHECK_VAR` set, which compares every
body built so with a full dump and fails loudly on a difference.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pokeralphd.domain.models import Battle

if TYPE_CHECKING:
    from pokeralphd.domain.models import Iteration

CHECK_VAR = "POKERALPH_CHECK_HISTORY_BODIES"
_KEYS = [(name, info.alias or name) for name, info in Battle.model_fields.items()]
_ITERATIONS = Battle.model_fields["iterations"].alias or "iterations"


class StaleHistoryBody(AssertionError):
    """(under :data:`CHECK_VAR`) A body built from kept dumps differs from a full dump."""


class HistoryBodies:
    """The dumps of one battle's iteration records, kept between its saves."""

    def __init__(self, check: bool | None = None) -> None:
        self.check = bool(os.environ.get(CHECK_VAR)) if check is None else check
        # id(record) -> (the record: kept alive so its id is not reused; the ids of its
        # values when dumped; its dump)
        self._dumps: dict[int, tuple[Iteration, tuple[int, ...], dict[str, Any]]] = {}

    def body(self, battle: Battle) -> dict[str, Any]:
        """``battle.model_dump(mode="json", by_alias=True)``, equal to it key for key and
        in the same order, dumping only the iterations not dumped before."""
        rest = battle.model_dump(mode="json", by_alias=True, exclude={"iterations"})
        kept: dict[int, tuple[Iteration, tuple[int, ...], dict[str, Any]]] = {}
        iterations = []
        for record in battle.iterations:
            marks = tuple(map(id, record.__dict__.values()))
            known = self._dumps.get(id(record))
            if known is None or known[0] is not record or known[1] != marks:
                known = (record, marks, record.model_dump(mode="json", by_alias=True))
            kept[id(record)] = known
            iterations.append(known[2])
        self._dumps = kept
        body = {key: iterations if key == _ITERATIONS else rest[key] for _, key in _KEYS}
        if self.check:
            full = battle.model_dump(mode="json", by_alias=True)
            if body != full or list(body) != list(full):
                raise StaleHistoryBody(
                    f"battle {battle.task_id}: a kept iteration dump is stale (a record "
                    "was changed in place after it was saved)"
                )
        return body
