"""Node set folding and expansion: our own gives ClusterShell's text for one-number names."""

from __future__ import annotations

import random

import pytest

from gdrcheck.fleet.nodeset import NodeSetError, expand, expand_own, fold, fold_own

try:
    from ClusterShell.NodeSet import NodeSet
except ImportError:  # optional
    NodeSet = None

needs_clustershell = pytest.mark.skipif(NodeSet is None, reason="ClusterShell not installed (pip install ClusterShell)")

PREFIXES = ("gpu", "node-", "a", "x.", "", "GPU", "dgx-h200-")
SUFFIXES = ("", "b", ".ib", "-ib", "-bmc")
PLAIN = ("login", "head", "mgmt-a", "node", "b")


def _names(rng: random.Random) -> list:
    """A set of one-number names: a few prefixes/suffixes, mixed padding, gaps, runs, plain names."""
    names = set()
    for _ in range(rng.randint(1, 4)):
        pre, suf = rng.choice(PREFIXES), rng.choice(SUFFIXES)
        width = rng.choice((0, 0, 2, 3, 4))
        start = rng.randint(0, 120)
        for _ in range(rng.randint(1, 6)):
            run = rng.randint(1, 12)
            for i in range(start, start + run):
                names.add(f"{pre}{i:0{width}d}{suf}" if (pre or suf or width) else str(i))
            start += run + rng.randint(1, 5)
        if rng.random() < 0.3:  # a second padding under the same prefix
            names.add(f"{pre}{rng.randint(0, 9):0{width + 1}d}{suf}")
    names.update(rng.sample(PLAIN, rng.randint(0, 2)))
    return sorted(names)


def test_examples():
    assert fold_own(["gpu001", "gpu002", "gpu003", "gpu005"]) == "gpu[001-003,005]"
    assert fold_own([f"gpu{i:03d}" for i in range(1, 77)] + ["gpu078"]) == "gpu[001-076,078]"
    assert fold_own(["a1b", "a2b", "a3b", "a5b"]) == "a[1-3,5]b"
    assert fold_own(["login"]) == "login"
    assert fold_own(["gpu7"]) == "gpu7"
    assert fold_own(["gpu9", "gpu10", "gpu099", "gpu100"]) == "gpu[9-10,099-100]"
    assert fold_own(["n0", "n00", "n1", "n01"]) == "n[0-1,00-01]"
    assert fold_own(["b", "a1", "a2", "login"]) == "a[1-2],b,login"
    assert fold_own([]) == ""


def test_names_with_several_numbers_fold_on_the_last():
    assert fold_own(["r1n1", "r1n2", "r2n1"]) == "r1n[1-2],r2n1"
    assert sorted(expand_own(fold_own(["r1n1", "r1n2", "r2n1"]))) == ["r1n1", "r1n2", "r2n1"]


def test_names_that_cannot_be_folded_stay_as_they_are():
    odd = ["gpu[1]", "a,b", "x@y", "gpu1", "gpu2"]
    assert fold(odd) == fold_own(odd)
    assert "gpu[1]" in fold_own(odd) and "gpu[1-2]" in fold_own(odd)


def test_expand_own():
    assert expand_own("a[1-3,5]b,gpu[001-003],x") == ["a1b", "a2b", "a3b", "a5b", "gpu001", "gpu002", "gpu003", "x"]
    assert expand_own("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    assert expand_own("n[1-9/4], n[098-100]") == ["n1", "n5", "n9", "n098", "n099", "n100"]
    for bad in ("n[001-10]", "n[3-1]", "n[1", "n]1", "n[a]", "@gpu", "a!b", ",", " "):
        with pytest.raises(NodeSetError):
            expand(bad, use_clustershell=False)


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_without_clustershell(seed):
    rng = random.Random(seed)
    names = _names(rng) + [f"r{rng.randint(1, 3)}n{i:02d}" for i in range(rng.randint(0, 5))]
    assert expand(fold(names, use_clustershell=False), use_clustershell=False) == sorted(set(names))


@needs_clustershell
@pytest.mark.parametrize("seed", range(300))
def test_our_folding_is_clustershells(seed):
    names = _names(random.Random(seed))
    assert fold_own(names) == str(NodeSet.fromlist(names)), names


@needs_clustershell
@pytest.mark.parametrize("seed", range(100))
def test_our_expansion_is_clustershells(seed):
    rng = random.Random(1000 + seed)
    names = _names(rng)
    text = str(NodeSet.fromlist(names))
    assert expand_own(text) == list(NodeSet(text)) or sorted(expand_own(text)) == sorted(NodeSet(text))
    multi = f"r[1-{rng.randint(1, 3)}]n[{rng.randint(0, 5):02d}-{rng.randint(6, 9):02d}]x"
    assert sorted(expand_own(multi)) == sorted(NodeSet(multi))


@needs_clustershell
def test_clustershell_is_used_when_installed():
    # several numbers fold in more than one dimension only with ClusterShell
    assert fold(["r1n1", "r1n2", "r2n1", "r2n2"]) == "r[1-2]n[1-2]"
    with pytest.raises(NodeSetError):
        expand("gpu[001-10]")


@pytest.mark.parametrize("own", [True, False])
def test_names_on_lines_or_spaced_are_a_list(own):
    """`--expect "$(scontrol show hostnames)"`: one name a line (or spaced) is as good as commas."""
    if not own:
        pytest.importorskip("ClusterShell")
    assert expand("gpu001\ngpu002\n  gpu[003-004] login\n", use_clustershell=not own) == \
        ["gpu001", "gpu002", "gpu003", "gpu004", "login"]
