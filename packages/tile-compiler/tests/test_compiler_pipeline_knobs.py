"""The TILE_* knobs: defaults, parsing, and the errors for malformed values."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from tile.compiler import KnobError, _knobs, knobs


def test_defaults() -> None:
    settings = knobs({"HOME": "/home/u", "PATH": "/bin"})
    assert settings.cache_dir == Path("/home/u/.cache/tile")
    assert settings.cache_size == 1 << 30
    assert settings.bytecode_version is None
    assert settings.opt_level == 3
    assert settings.tileiras is None
    assert settings.debug is False
    assert settings.path == "/bin"


@pytest.mark.parametrize("off", ["0", "off", "None", "", "false"])
def test_cache_can_be_turned_off(off: str) -> None:
    assert knobs({"TILE_CACHE_DIR": off}).cache_dir is None


def test_values_are_parsed() -> None:
    settings = knobs(
        {
            "TILE_CACHE_DIR": "/data/tile",
            "TILE_CACHE_SIZE": "500M",
            "TILE_BYTECODE_VERSION": "13.3",
            "TILE_OPT_LEVEL": "1",
            "TILE_COMPILE_TIMEOUT": "2.5",
            "TILE_DEBUG": "1",
            "TILE_TILEIRAS": "/opt/tileiras",
            "XDG_CACHE_HOME": "/ignored",
        }
    )
    assert settings.cache_dir == Path("/data/tile")
    assert settings.cache_size == 500 << 20
    assert settings.bytecode_version == (13, 3)
    assert settings.opt_level == 1
    assert settings.compile_timeout == 2.5
    assert settings.debug is True
    assert settings.tileiras == Path("/opt/tileiras")


def test_xdg_cache_home_moves_the_default() -> None:
    assert knobs({"XDG_CACHE_HOME": "/xdg"}).cache_dir == Path("/xdg/tile")


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("TILE_CACHE_SIZE", "lots", "a byte count such as 500M"),
        ("TILE_BYTECODE_VERSION", "13", "MAJOR.MINOR"),
        ("TILE_OPT_LEVEL", "4", "an integer from 0 to 3"),
        ("TILE_COMPILE_TIMEOUT", "-1", "a positive number of seconds"),
        ("TILE_DEBUG", "maybe", "1 or 0"),
    ],
)
def test_malformed_values_name_the_variable_and_the_fix(name: str, value: str, expected: str) -> None:
    with pytest.raises(KnobError, match=expected) as info:
        knobs({name: value})
    assert f"{name}={value!r}" in str(info.value)
    assert "fix or unset it" in str(info.value)
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


def test_the_environment_is_read_on_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TILE_OPT_LEVEL", "2")
    assert knobs().opt_level == 2
    monkeypatch.setenv("TILE_OPT_LEVEL", "0")
    assert knobs().opt_level == 0
    monkeypatch.delenv("TILE_OPT_LEVEL")
    assert knobs().opt_level == 3


def test_the_process_environment_fast_path_reads_what_the_mapping_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """`knobs()` reads ``os.environ``'s bytes dict directly: every write through ``os.environ`` shows at once, and the
    result equals parsing a copy of the mapping through its public interface."""
    assert _knobs._raw_environ(os.environ) is not None  # the fast path is the one under test (POSIX CPython)
    for name, value in [("TILE_DUMP", "ir,ast"), ("TILE_CACHE_SIZE", "3M"), ("TILE_TILEIRAS", "/opt/t\u00e9/tileiras")]:
        monkeypatch.setenv(name, value)
        assert knobs() == knobs(dict(os.environ))
    assert knobs().dump == frozenset({"ir", "ast"})
    assert knobs().tileiras == Path("/opt/t\u00e9/tileiras")
    os.environ["TILE_CACHE_SIZE"] = "5M"  # monkeypatch restores it
    assert knobs().cache_size == 5 << 20
    del os.environ["TILE_DUMP"]
    assert knobs().dump == frozenset()
    monkeypatch.setenv("TILE_OPT_LEVEL", "9")
    with pytest.raises(KnobError, match="TILE_OPT_LEVEL"):
        knobs()
    with pytest.raises(KnobError, match="TILE_OPT_LEVEL"):  # an error is never remembered as a result
        knobs()


def test_a_replaced_process_environment_is_read_through_its_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", {"TILE_OPT_LEVEL": "1", "HOME": "/h"})
    assert _knobs._raw_environ(os.environ) is None
    assert knobs().opt_level == 1
    assert knobs().cache_dir == Path("/h/.cache/tile")
