"""How NCCL reads its settings, per version (``gdrcheck.rules.nccl.settings``; docs/nccl.md, "Settings").

Each case is named after what it holds; each is paired with the neighbour NCCL decides the other way.
"""

from __future__ import annotations

import pytest

from gdrcheck.rules.nccl.settings import (
    c_strtol,
    conf_file_lines,
    conf_files,
    effective_env,
    p2p_disabled,
    param,
    parse_level,
    settings,
)

V2_18 = (2, 18, 1)
V2_22 = (2, 22, 3)
V2_23 = (2, 23, 4)
V2_25 = (2, 25, 1)
V2_26 = (2, 26, 2)
V2_27_3 = (2, 27, 3)
V2_29 = (2, 29, 7)
V2_30 = (2, 30, 7)


@pytest.mark.parametrize("case,value,version,level", [
    ("p2p-level-upper", "PHB", V2_30, "PHB"),
    ("p2p-level-lowercase", "phb", V2_30, None),           # strcmp: case-sensitive, the default stays
    ("p2p-level-leading-space", " PHB", V2_30, None),      # no trimming
    ("p2p-level-trailing-cr", "PHB\r", V2_30, None),
    ("p2p-level-hex", "0x3", V2_30, "PHB"),                # strtol(..., 0)
    ("p2p-level-octal", "010", V2_30, "SYS"),              # 010 = 8, clamped to 5 -> SYS
    ("p2p-level-08-octal-stops", "08", V2_30, "LOC"),     # octal parse stops at '8': 0
    ("p2p-level-4-is-sys", "4", V2_30, "SYS"),
    ("p2p-level-1-is-pix", "1", V2_30, "PIX"),
    ("p2p-level-2junk", "2abc", V2_30, "PXB"),
    ("p2p-level-minus", "-1", V2_30, None),               # first character not a digit
    ("p2p-level-c2c-2.26", "C2C", V2_26, "C2C"),
    ("p2p-level-c2c-2.25", "C2C", V2_25, None),           # no such name before 2.26
    ("p2p-level-p2c-2.27", "P2C", V2_27_3, "P2C"),
    ("p2p-level-p2c-2.26", "P2C", V2_26, None),
    ("p2p-level-pxn-2.12", "PXN", (2, 12, 7), "PXN"),
    ("p2p-level-pxn-2.11", "PXN", (2, 11, 4), None),
    ("p2p-level-net-not-a-level", "NET", V2_30, None),   # names past SYS are not levels
])
def test_level_names(case, value, version, level):
    assert parse_level(value, version) == level, case


@pytest.mark.parametrize("text,value,erange", [
    ("1", 1, False), ("01", 1, False), ("0x10", 16, False), ("  7", 7, False), ("false", 0, False),
    ("no", 0, False), ("0x", 0, False), ("1e3", 1, False), ("-2", -2, False),
    ("99999999999999999999", (1 << 63) - 1, True),
])
def test_strtoll(text, value, erange):
    assert c_strtol(text) == (value, erange)


@pytest.mark.parametrize("case,raw,disabled", [
    ("p2p-disable-1", "1", True), ("p2p-disable-01", "01", True), ("p2p-disable-0x1", "0x1", True),
    ("p2p-disable-2", "2", False), ("p2p-disable-true", "true", False), ("p2p-disable-empty", "", False),
    ("p2p-disable-int-wrap", "4294967297", True),  # strtol into an int: 2^32 + 1 -> 1
])
def test_p2p_disable(case, raw, disabled):
    assert p2p_disabled({"NCCL_P2P_DISABLE": raw}) is disabled, case


@pytest.mark.parametrize("case,raw,enabled", [
    ("dmabuf-enable-unset", None, True), ("dmabuf-enable-empty", "", True), ("dmabuf-enable-1", "1", True),
    ("dmabuf-enable-false", "false", False), ("dmabuf-enable-no", "no", False), ("dmabuf-enable-0x0", "0x0", False),
    ("dmabuf-enable-overflow", "99999999999999999999", True),  # ERANGE: the default
])
def test_dmabuf_enable(case, raw, enabled):
    env = {} if raw is None else {"NCCL_DMABUF_ENABLE": raw}
    assert settings(V2_30, env).dmabuf_enabled is enabled, case


def test_param_source_words():
    assert param({}, "NCCL_X", 3) == (3, "NCCL default")
    assert param({"NCCL_X": "0x2"}, "NCCL_X", 3)[0] == 2


def test_p2p_disable_wins_over_level():
    st = settings(V2_30, {"NCCL_P2P_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS"}, "GenuineIntel", 4)
    assert st.user_p2p_level == "LOC"
    st = settings(V2_30, {"NCCL_P2P_DISABLE": "0", "NCCL_P2P_LEVEL": "SYS"}, "GenuineIntel", 4)
    assert st.user_p2p_level == "SYS"


def test_ignored_level_is_reported():
    st = settings(V2_30, {"NCCL_P2P_LEVEL": "sys", "NCCL_NET_GDR_LEVEL": "phb"}, "GenuineIntel", 4)
    assert st.user_p2p_level is None and st.p2p_level == "PXB"
    assert st.gdr_level == "P2C" and len(st.ignored) == 2


@pytest.mark.parametrize("version,level", [(V2_30, "P2C"), ((2, 28, 9), "PXB"), (V2_22, "PXB")])
def test_gdr_default_level_per_version(version, level):
    assert settings(version, {}).gdr_level == level
    assert settings((2, 30, 7), {"NCCL_NET_GDR_C2C": "0"}).gdr_level == "PXB"


# -- settings files ----------------------------------------------------------

HOME = {"HOME": "/home/env", "pw_dir": "/home/pw"}


@pytest.mark.parametrize("case,version,env,files", [
    ("conf-file-ignored-2.22", V2_22, {"NCCL_CONF_FILE": "/x.conf"}, ["/home/pw/.nccl.conf", "/etc/nccl.conf"]),
    ("conf-file-2.23", V2_23, {"NCCL_CONF_FILE": "/x.conf"}, ["/x.conf", "/etc/nccl.conf"]),
    ("conf-file-empty-2.23", V2_23, {"NCCL_CONF_FILE": ""}, ["/home/pw/.nccl.conf", "/etc/nccl.conf"]),
    ("home-from-passwd-2.29", V2_29, {}, ["/home/pw/.nccl.conf", "/etc/nccl.conf"]),
    ("home-from-env-2.30.3", (2, 30, 3), {}, ["/home/env/.nccl.conf", "/etc/nccl.conf"]),
])
def test_conf_files_per_version(case, version, env, files):
    assert conf_files(version, env, HOME) == files, case


def test_conf_comments_from_2_26():
    text = "#NCCL_P2P_LEVEL=SYS\nNCCL_P2P_LEVEL=PHB\n"
    assert conf_file_lines(text, V2_26)["NCCL_P2P_LEVEL"] == "PHB"
    # before 2.26 a '#' line is an ordinary NAME=value line: it defines "#NCCL_P2P_LEVEL", harmless
    assert conf_file_lines(text, V2_25) == {"#NCCL_P2P_LEVEL": "SYS", "NCCL_P2P_LEVEL": "PHB"}


def test_conf_cr_stripped_from_2_30_3():
    text = "NCCL_P2P_LEVEL=PHB\r\n"
    assert conf_file_lines(text, (2, 30, 3))["NCCL_P2P_LEVEL"] == "PHB"
    assert conf_file_lines(text, V2_29)["NCCL_P2P_LEVEL"] == "PHB\r"
    assert parse_level(conf_file_lines(text, V2_29)["NCCL_P2P_LEVEL"], V2_29) is None


def test_conf_untrimmed_first_wins():
    got = conf_file_lines("NCCL_P2P_LEVEL = SYS\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_NET_GDR_LEVEL=SYS\n", V2_30)
    assert got == {"NCCL_P2P_LEVEL ": " SYS", "NCCL_NET_GDR_LEVEL": "PHB"}


def test_env_wins_then_user_file_then_etc():
    files = {"/home/pw/.nccl.conf": "NCCL_P2P_LEVEL=PHB\nNCCL_NET_GDR_LEVEL=PHB\n",
             "/etc/nccl.conf": "NCCL_P2P_LEVEL=SYS\nNCCL_NET_GDR_LEVEL=SYS\nNCCL_IB_HCA=mlx5_0\n"}
    got, read = effective_env(V2_22, {"NCCL_P2P_LEVEL": "PIX"}, "environment", files, HOME, {})
    assert got["NCCL_P2P_LEVEL"].value == "PIX" and got["NCCL_P2P_LEVEL"].source == "environment"
    assert got["NCCL_NET_GDR_LEVEL"].value == "PHB" and got["NCCL_NET_GDR_LEVEL"].source == "/home/pw/.nccl.conf"
    assert got["NCCL_IB_HCA"].source == "/etc/nccl.conf"
    assert read == ["/home/pw/.nccl.conf", "/etc/nccl.conf"]


def test_conf_file_setting_per_version():
    files = {"/site.conf": "NCCL_P2P_LEVEL=SYS\n", "/home/pw/.nccl.conf": "NCCL_P2P_LEVEL=PHB\n"}
    env = {"NCCL_CONF_FILE": "/site.conf"}
    assert effective_env(V2_22, env, "environment", files, HOME, {})[0]["NCCL_P2P_LEVEL"].value == "PHB"
    assert effective_env(V2_23, env, "environment", files, HOME, {})[0]["NCCL_P2P_LEVEL"].value == "SYS"
