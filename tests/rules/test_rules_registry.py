"""The rule registry: stable, unique codes; every rule documented; explain prints it."""

import re

from support.cli_util import call

from gdrcheck.rules import all_rules
from gdrcheck.rules.base import ORIGINS, SCOPES, SEVERITIES


def test_registry_is_well_formed():
    rules = all_rules()
    codes = [r.code for r in rules]
    assert codes == sorted(codes) and len(codes) == len(set(codes))
    assert len({r.name for r in rules}) == len(rules)
    for r in rules:
        assert re.match(r"^GDR\d{3}$", r.code)
        assert re.match(r"^[a-z0-9]+(-[a-z0-9]+)*$", r.name), r.name
        assert r.severity in SEVERITIES and r.scope in SCOPES and r.origin in ORIGINS
        assert r.title and len(r.rationale) > 40 and len(r.remediation) > 20


def test_rules_and_explain_commands():
    p = call("rules", "--json")
    assert p.returncode == 0
    import json

    doc = json.loads(p.stdout)
    assert {r["code"] for r in doc["rules"]} == {r.code for r in all_rules()}
    e = call("explain", "GDR040")
    assert e.returncode == 0 and "disable_acs_redir" in e.stdout
    assert call("explain", "acs-redirect-on-path").returncode == 0
