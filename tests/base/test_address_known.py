"""A made-up address (a device an input names without a bus id) is recognised by one function,
``gdrcheck.model.address_known``; the collectors that make such an address are the only other place that
names the mark."""

from __future__ import annotations

import re

from support.cli_util import ROOT

from gdrcheck.model import address_known


def test_address_known_reads_the_mark():
    from types import SimpleNamespace

    assert address_known(SimpleNamespace(extra={})) and address_known(SimpleNamespace(extra={"x": 1}))
    assert not address_known(SimpleNamespace(extra={"synthetic": True}))


def test_no_stage_reads_the_mark_itself():
    mark = re.compile(r"extra\.get\(\s*[\"']synthetic[\"']")
    readers = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py"))
               if p.name != "model.py" for n, line in enumerate(p.read_text().splitlines(), 1) if mark.search(line)]
    assert readers == [], readers


def test_no_stage_tests_the_made_up_domain():
    """The domain a made-up address is put in (``SYNTH_DOMAIN``, ``ffff:``) is the collectors' to know: a stage
    that tests an address's prefix instead of asking ``address_known`` also takes a vendor-declared bridge
    (Azure's ``ffff:ff:01.0``) for a made-up device."""
    prefix = re.compile(r"SYNTH_DOMAIN|DECLARED_DOMAIN|startswith\(\s*f?[\"']ffff:|[\"']ffff:")
    readers = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "gdrcheck").rglob("*.py"))
               if "collectors" not in p.relative_to(ROOT).parts
               for n, line in enumerate(p.read_text().splitlines(), 1) if prefix.search(line)]
    assert readers == [], readers


def test_a_switch_without_an_address_on_the_node_is_asked_one_way():
    """A made-up address and a switch an input declares for hardware the node does not show (an NCCL topology
    file's ``ffff:ff:..`` bridge) are both told by ``address_on_node``, never by the address's domain."""
    from types import SimpleNamespace

    from gdrcheck.model import address_on_node

    assert address_on_node(SimpleNamespace(extra={}))
    assert not address_on_node(SimpleNamespace(extra={"synthetic": True}))
    assert not address_on_node(SimpleNamespace(extra={"vendor_declared": True}))
