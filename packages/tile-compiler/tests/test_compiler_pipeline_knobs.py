"""The TILE_* knobs: defaults, parsing, and the errors for malformed values."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tile.compiler import KnobError, knobs


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
