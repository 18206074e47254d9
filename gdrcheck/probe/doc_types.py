"""A probe document read back (``report --probe FILE``) held to the types of its schema.

The file may come from another gdrcheck version, another node, or an editor: every value the report
reads has the type ``gdrcheck/schemas/probe.schema.json`` gives it (``type``, ``properties``, ``items``,
``required``), or the file is refused in one line naming the first field that is not
(``checks[].elapsed_s is a string, not a number``). Values are not judged beyond their types: a string
is shown escaped whatever it holds. The walk is iterative, so a deeply nested file costs no recursion.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

_WORDS = {"object": "an object", "array": "a list", "string": "a string", "boolean": "true or false",
          "integer": "a whole number", "number": "a number", "null": "null"}
_SCHEMA: dict = {}


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    for t, name in ((float, "number"), (str, "string"), (dict, "object"), (list, "array")):
        if isinstance(value, t):
            return name
    return "null"


def _fits(value: Any, types: Any) -> bool:
    types = [types] if isinstance(types, str) else list(types)
    kind = _kind(value)
    return kind in types or (kind == "integer" and "number" in types)


def type_problem(doc: Any, schema: dict) -> Optional[str]:
    """None where ``doc`` has the schema's types; else the first field that does not, in a few words."""
    todo = [(doc, schema, "the document")]
    while todo:
        value, node, where = todo.pop()
        types = node.get("type")
        if types is not None and not _fits(value, types):
            want = " or ".join(_WORDS.get(t, t) for t in ([types] if isinstance(types, str) else types))
            return f"{where} is {_WORDS[_kind(value)]}, not {want}"
        if isinstance(value, dict):
            for key in node.get("required", ()):
                if key not in value:
                    return f"{where} has no {key}"
            props = node.get("properties", {})
            base = "" if where == "the document" else where + "."
            todo.extend((value[k], props[k], base + k) for k in props if k in value)
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            todo.extend((item, node["items"], where + "[]") for item in value)
    return None


def probe_schema() -> dict:
    if not _SCHEMA:
        from importlib.resources import files

        _SCHEMA.update(json.loads(files("gdrcheck").joinpath("schemas", "probe.schema.json").read_text()))
    return _SCHEMA
