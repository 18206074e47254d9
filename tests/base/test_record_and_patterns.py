"""gdrcheck.record and gdrcheck.patterns: what the facts classes and module-level patterns rely on."""

from __future__ import annotations

import pickle
import re
from typing import Optional

import pytest

from gdrcheck.model import Bar, Link, PciFunction
from gdrcheck.patterns import lazy_pattern
from gdrcheck.record import FrozenInstanceError, field, fields_of, record, replace


@record(frozen=True)
class Frozen:
    a: int
    b: Optional[int] = None
    c: tuple[int, ...] = field(default_factory=tuple)


@record
class Mutable:
    items: list = field(default_factory=list)


def test_frozen_record_has_value_semantics():
    x = Frozen(1)
    assert x == Frozen(1, None, ()) and x != Frozen(1, 2)
    assert hash(x) == hash(Frozen(1))
    assert repr(x) == "Frozen(a=1, b=None, c=())"
    assert x != (1, None, ())  # a record is not a tuple
    assert replace(x, b=5) == Frozen(1, 5)
    assert fields_of(Frozen) == ("a", "b", "c")
    with pytest.raises(FrozenInstanceError):
        x.a = 2
    with pytest.raises(TypeError):
        replace(x, nope=1)
    with pytest.raises(TypeError):
        Frozen()


def test_mutable_record_gets_a_fresh_default_and_is_unhashable():
    m, n = Mutable(), Mutable()
    m.items.append(1)
    assert n.items == [] and m != n
    with pytest.raises(TypeError):
        hash(m)


def test_records_pickle_and_facts_compare():
    assert pickle.loads(pickle.dumps(Frozen(1, 2, (3,)))) == Frozen(1, 2, (3,))
    d = PciFunction(bdf="0000:01:00.0", root="0000:00", bars=(Bar(0, 0, 16),), link=Link(16.0, 16, 16.0, 16))
    assert d == PciFunction(bdf="0000:01:00.0", root="0000:00", bars=(Bar(0, 0, 16),), link=Link(16.0, 16, 16.0, 16))
    assert replace(d, gpu_index=0).gpu_index == 0 and d.gpu_index is None


def test_lazy_pattern_behaves_as_compiled():
    p = lazy_pattern(r"^(\d+)-(\d+)$", re.I)
    assert p.match("3-4").groups() == ("3", "4")
    assert p.pattern == r"^(\d+)-(\d+)$" and p.flags & re.I
    assert p.sub("x", "1-2") == "x"
    with pytest.raises(AttributeError):
        p.no_such_method


@record(frozen=True)
class Many:
    a: int
    b: tuple[int, ...] = field(default_factory=tuple)
    c: str = "x"


def test_the_generic_and_the_compiled_init_agree():
    from gdrcheck.record import COMPILE_AFTER

    made = [Many(i, c=str(i)) for i in range(COMPILE_AFTER + 8)]  # the first through the generic __init__
    assert [m.a for m in made] == list(range(COMPILE_AFTER + 8)) and all(m.b == () for m in made)
    assert made[0] == Many(0, (), "0") and made[-1] == Many(COMPILE_AFTER + 7, c=str(COMPILE_AFTER + 7))
    for bad in (lambda: Many(), lambda: Many(1, (), "x", 4), lambda: Many(1, a=2), lambda: Many(1, d=3)):
        with pytest.raises(TypeError):
            bad()
