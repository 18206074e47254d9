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
from functools import lru_cache
from types import MappingProxyType

from gdrcheck.record import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, Optional


@record(frozen=True)
class Cause:
    """Why a decision came out as it did, or a later step that qualifies it: a code and its parameters."""

    code: str
    params: Mapping[str, Any]  # name -> value (made by cause()/need(), never changed)

    def get(self, name: str, default: Any = None) -> Any:
        return self.params.get(name, default)


@record(frozen=True)
class Need(Cause):
    """What the decision rests on that the input does not show: a code and its parameters."""


def cause(code: str, **params: Any) -> Cause:
    return Cause(code, params)


def need(code: str, **params: Any) -> Need:
    return Need(code, params)


@lru_cache(maxsize=4096)
def shared_cause(code: str, **params: Any) -> Cause:
    """A cause whose parameters are plain values many pairs repeat (a path type, a level), made once: a record
    is never changed, so pairs share it."""
    return Cause(code, params)


FIELDS = ("distance", "via", "mode")
# the needs that are the job's to settle (which GPUs share the communicator, how it runs them); every other need is
# a fact of the node the input does not show
JOB_NEEDS = frozenset({"gdr.pxn_rank", "p2p.nvb_rank", "job.gpus", "job.assumes", "gdr.mlopart", "rccl.gdr.pxn_later"})
NO_FACTS: Mapping[str, Any] = MappingProxyType({})
_ABSENT = object()


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
    facts: Mapping[str, Any] = NO_FACTS  # key -> value

    def plus(self, *more: Cause, value: Optional[str] = None) -> Decision:
        """A new record with more causes and needs (each by its type), and the value a later step set."""
        causes = self.causes + tuple(c for c in more if not isinstance(c, Need))
        needs = self.needs + tuple(c for c in more if isinstance(c, Need))
        return self.restated(causes, needs, value or self.value)

    def restated(self, causes: tuple, needs: tuple, value: Optional[str] = None) -> Decision:
        """A new record with these causes and needs (and value) in place of this one's."""
        return Decision(self.word, value or self.value, causes, needs, self.distance, self.via, self.mode, self.facts)

    def with_facts(self, **facts: Any) -> Decision:
        """A new record with these keys beside the decision (a key given again replaces the old value)."""
        merged = dict(self.facts)
        merged.update(facts)
        return self.beside(merged)

    def beside(self, facts: Mapping[str, Any]) -> Decision:
        """The same decision with other keys beside it, its words shared with this one and composed once, when
        first read (a node's pairs share a few distinct decisions, each with the pair's own path facts)."""
        new = Decision(self.word, self.value, self.causes, self.needs, self.distance, self.via, self.mode, facts)
        new.__dict__["_words_of"] = self.__dict__.get("_words_of", self)
        return new

    def shared(self) -> Decision:
        """The record whose causes, needs, value and words this one shares (itself, or the record it was set
        beside other path facts from)."""
        return self.__dict__.get("_words_of", self)

    def has(self, code: str) -> bool:
        return any(c.code == code for c in self.causes)

    def rests_on_job(self) -> bool:
        """Whether one of the needs is the job's to settle (:data:`JOB_NEEDS`)."""
        return any(n.code in JOB_NEEDS for n in self.needs)

    def from_input(self) -> bool:
        """A flag the decision rests on was read from NCCL's own XML in the input (a job's log can say it)."""
        return any(c.get("from_input") for c in self.causes)

    # the mapping the JSON contract holds, its words composed when first asked (the record never changes)
    def as_contract(self) -> dict[str, Any]:
        """The decision as ``pairs[].nccl`` holds it, made once per record and shared: read it, do not change
        it."""
        got = self.__dict__.get("_said")
        if got is None:
            reason, depends_on = self._words()
            got = {self.word: self.value, "reason": reason}
            if depends_on:
                got["depends_on"] = depends_on
            if self.distance is not None:  # FIELDS, in order
                got["distance"] = self.distance
            if self.via is not None:
                got["via"] = self.via
            if self.mode is not None:
                got["mode"] = self.mode
            facts = self.facts
            if got.keys().isdisjoint(facts):  # nearly always: the facts after the decision's own keys
                got.update(facts)
            else:
                for k, v in facts.items():
                    got.setdefault(k, v)
            self.__dict__["_said"] = got  # a cache of the words, not a field: replace() makes a record without it
        return got

    def _words(self) -> tuple[str, list[str]]:
        words = self.__dict__.get("_words_said")
        if words is None and "_words_of" in self.__dict__:
            words = self.__dict__["_words_said"] = self.__dict__["_words_of"]._words()
        if words is None:
            words = self.__dict__["_words_said"] = (_SAID or _words_module())(self)
        return words

    def __getitem__(self, key: str) -> Any:
        got = self.get(key, _ABSENT)
        if got is _ABSENT:
            raise KeyError(key)
        return got

    def __contains__(self, key: object) -> bool:
        return key in self.as_contract()

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_contract())

    def __len__(self) -> int:
        return len(self.as_contract())

    def __bool__(self) -> bool:  # a decision always holds its word: `view or {}` need not compose the words
        return True

    def get(self, key: str, default: Any = None) -> Any:
        """One key, its words composed only where it is the reason or ``depends_on``."""
        if key == self.word:
            return self.value
        if key == "reason":
            return self._words()[0]
        if key == "depends_on":
            return self._words()[1] if self.needs else default
        if key in FIELDS:
            got = getattr(self, key)
            return default if got is None else got
        return self.facts.get(key, default)

    def keys(self):  # type: ignore[override]
        return self.as_contract().keys()

    def items(self):  # type: ignore[override]
        return self.as_contract().items()

    def values(self):  # type: ignore[override]
        return self.as_contract().values()


_SAID = None  # gdrcheck.documents.decision_words.said, imported when a record's words are first asked


def _words_module():
    global _SAID
    from gdrcheck.documents.decision_words import said  # the words are the documents'

    _SAID = said
    return said


Decision.__eq__ = Mapping.__eq__  # equal to the mapping it reads as (a test's dict too)
Decision.__hash__ = None  # its facts may hold lists
