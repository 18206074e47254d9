"""Regular expressions compiled on first use.

A module-level ``re.compile`` costs its compile at import, in every run,
whether or not the run ever matches it (some 90 patterns, 5 ms). A pattern
made with :func:`lazy_pattern` compiles the first time one of its methods is
asked for and is then as fast as the compiled one.
"""

from __future__ import annotations

import re

_METHODS = ("match", "fullmatch", "search", "sub", "subn", "findall", "finditer", "split", "pattern", "flags",
            "groups", "groupindex", "scanner")


class LazyPattern:
    """Stands for ``re.compile(text, flags)`` until first used."""

    def __init__(self, text: str, flags: int = 0) -> None:
        self._text = text
        self._flags = flags

    def __getattr__(self, name: str):
        if name.startswith("__") or name not in _METHODS:
            raise AttributeError(name)
        compiled = re.compile(self._text, self._flags)
        for m in _METHODS:
            self.__dict__[m] = getattr(compiled, m)
        return self.__dict__[name]

    def __repr__(self) -> str:
        return f"lazy_pattern({self._text!r})"


def lazy_pattern(text: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(text, flags)
