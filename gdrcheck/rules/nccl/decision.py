"""NCCL's decision for one pair as a record: made once in ``rules/`` and never edited.

A :class:`Decision` holds the value (``enabled``/``disabled``/``unknown``), the path type NCCL compared
(``distance``), the relay GPU (``via``, PXN), the DMA mode, and why: ``causes`` and ``needs``, small records
of a code and its parameters. A later step (the PXN relay an input cannot show, a Data Direct function, the
topology file's tree, the job's GPUs, the job's NCCL log) returns a new record with one more cause or need
(:meth:`Decision.plus`). The words for each code are composed once, in :mod:`gdrcheck.documents.decision_words`.

The record reads as the mapping the JSON contract holds (``decision["gdr"]``, ``decision.get("reason")``,
``decision.get("depends_on")``), its words composed when asked: readers need not know the record.
"""

from __future__ import annotations

from collections.abc import Mapping

from gdrcheck.record import record, replace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Optional


@record(frozen=True)
class Cause:
    """Why a decision came out as it did, or a later step that qualifies it: a code and its parameters."""

    code: str
    params: tuple = ()  # ((name, value), ...), in the order given

    def get(self, name: str, default: Any = None) -> Any:
        for k, v in self.params:
            if k == name:
                return v
        return default


@record(frozen=True)
class Need(Cause):
    """What the decision rests on that the input does not show: a code and its parameters."""


def cause(code: str, **params: Any) -> Cause:
    return Cause(code, tuple(params.items()))


def need(code: str, **params: Any) -> Need:
    return Need(code, tuple(params.items()))


FIELDS = ("distance", "via", "mode")


@record(frozen=True)
class Decision(Mapping):
    """One pair's decision: ``word`` is ``gdr`` (GPU-NIC) or ``p2p`` (GPU-GPU); ``facts`` the other keys the
    JSON contract carries beside it (``gpu_gdr_supported``, ``init_fails``, the send side, the path type the
    topology file gave, what a job's log observed...)."""

    word: str
    value: str
    causes: tuple = ()
    needs: tuple = ()
    distance: Optional[str] = None
    via: Optional[str] = None
    mode: Optional[str] = None
    facts: tuple = ()  # ((key, value), ...)

    def plus(self, *more: Cause, value: Optional[str] = None) -> Decision:
        """A new record with more causes and needs (each by its type), and the value a later step set."""
        causes = self.causes + tuple(c for c in more if not isinstance(c, Need))
        needs = self.needs + tuple(c for c in more if isinstance(c, Need))
        return replace(self, causes=causes, needs=needs, value=value or self.value)

    def with_facts(self, **facts: Any) -> Decision:
        """A new record with these keys beside the decision (a key given again replaces the old value)."""
        merged = dict(self.facts)
        merged.update(facts)
        return replace(self, facts=tuple(merged.items()))

    def has(self, code: str) -> bool:
        return any(c.code == code for c in self.causes)

    def from_input(self) -> bool:
        """A flag the decision rests on was read from NCCL's own XML in the input (a job's log can say it)."""
        return any(c.get("from_input") for c in self.causes)

    # the mapping the JSON contract holds, words composed on demand
    def _keys(self) -> list[str]:
        keys = [self.word, "reason"]
        if self.needs:
            keys.append("depends_on")
        keys += [k for k in FIELDS if getattr(self, k) is not None]
        return keys + [k for k, _ in self.facts if k not in keys]

    def __getitem__(self, key: str) -> Any:
        if key == self.word:
            return self.value
        if key == "reason":
            from gdrcheck.documents.decision_words import reason  # the words are the documents'

            return reason(self)
        if key == "depends_on" and self.needs:
            from gdrcheck.documents.decision_words import depends_on

            return depends_on(self)
        if key in FIELDS and getattr(self, key) is not None:
            return getattr(self, key)
        for k, v in self.facts:
            if k == key:
                return v
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())


Decision.__eq__ = Mapping.__eq__  # equal to the mapping it reads as (a test's dict too)
Decision.__hash__ = None  # its facts may hold lists
