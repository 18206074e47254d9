"""The ASCII shortcuts of the JSON writer and of clip_name give what their patterns give: every character
below U+0100, the line and paragraph separators, a surrogate and a bidirectional control, alone and in text."""

from __future__ import annotations

import re

from gdrcheck.collectors import clip
from gdrcheck.collectors.clip import clip_name
from gdrcheck.render import json_out
from gdrcheck.render.json_out import escape_controls

_SAMPLES = ([chr(c) for c in range(0x100)] + ["\u2028", "\u2029", "\ud800", "\u202e", "\u061c", "\u00e9", "\u4e2d"])


def _by_pattern_json(text: str) -> str:
    raw = re.compile(json_out._RAW._text)
    return raw.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _by_pattern_clip(name: str) -> str:
    if not re.compile(clip._UNSHOWN._text).search(name):
        return name
    return re.compile(clip._CONTROL._text).sub("?", name).replace("\n", " ").replace("\t", " ")


def test_escape_controls_is_its_pattern_for_every_character():
    for ch in _SAMPLES:
        for text in (ch, f'{{"name":"mlx5_0{ch}x"}}\n', "plain ascii " + ch):
            assert escape_controls(text) == _by_pattern_json(text), repr(text)
    assert escape_controls('{"a":"b"}\n') == '{"a":"b"}\n'


def test_clip_name_is_its_pattern_for_every_character():
    for ch in _SAMPLES:
        for name in (ch, f"mlx5_0{ch}x", "NVIDIA H100 " + ch):
            assert clip_name(name) == _by_pattern_clip(name), repr(name)
    assert clip_name("NVIDIA Corporation GH100 [H100 SXM5 80GB]") == "NVIDIA Corporation GH100 [H100 SXM5 80GB]"
