"""Cubin architecture detection and the wrong-arch refusal, on cubins made by tileiras here (no GPU)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

import tile.bindings as tb
import tile.core as tc
from tile.core._cubin import runs_on


@pytest.mark.requires_tileiras
@pytest.mark.parametrize(("arch", "cc"), [("sm_80", (8, 0)), ("sm_86", (8, 6)), ("sm_90", (9, 0)), ("sm_120", (12, 0))])
def test_arch_is_read_from_tileiras_cubins(
    assemble_vec_add: Callable[[str], bytes], arch: str, cc: tuple[int, int]
) -> None:
    assert tc.cubin_arch(assemble_vec_add(arch)) == cc


@pytest.mark.parametrize("image", [b"", b"not an elf", b"\x7fELF" + bytes(60)])
def test_non_cuda_images_have_no_arch(image: bytes) -> None:
    assert tc.cubin_arch(image) is None


@pytest.mark.parametrize(
    ("cubin", "device", "ok"),
    [
        ((8, 0), (8, 6), True),
        ((8, 6), (8, 0), False),
        ((8, 0), (9, 0), False),
        ((9, 0), (9, 0), True),
        ((10, 0), (9, 0), False),
    ],
)
def test_sass_compatibility(cubin: tuple[int, int], device: tuple[int, int], ok: bool) -> None:
    assert runs_on(cubin, device) is ok


class FakeH100:
    """Just enough of a Device for the arch check, which runs before any driver call."""

    compute_capability = (9, 0)
    arch = "sm_90"
    ordinal = 0

    def __repr__(self) -> str:
        return "<Device 0: fake H100 (sm_90)>"


@pytest.mark.requires_tileiras
def test_wrong_arch_cubin_is_refused_before_the_driver(assemble_vec_add: Callable[[str], bytes]) -> None:
    image = assemble_vec_add("sm_80")
    device: Any = FakeH100()
    with pytest.raises(tc.ArchMismatchError, match=r"built for sm_80 but .* is sm_90: recompile it for sm_90"):
        tc.Module.from_cubin(image, device=device)


def test_empty_image_is_a_null_handle() -> None:
    with pytest.raises(tc.NullHandleError, match="cubin image is empty"):
        tc.Module.from_cubin(b"")


@pytest.mark.requires_tileiras
def test_fixture_abi_is_what_its_generator_documents(missing: Callable[[str, str], NoReturn]) -> None:
    found = tb.find_tileiras()
    assert found is not None
    disasm = found.path.with_name("tileirdisasm")
    if not disasm.exists():
        missing("requires_tileiras", "tileirdisasm is not installed beside tileiras")
    fixture = Path(__file__).with_name("fixtures") / "vec_add.tileirbc"
    text = subprocess.run([str(disasm), str(fixture)], capture_output=True, text=True, check=True).stdout
    entry = re.search(r"entry @vec_add\((.*?)\)", text)
    assert entry is not None
    types = re.findall(r"%arg\d+: tile<([^>]*>?)>", entry.group(1))
    assert types == ["ptr<f32>", "i32", "i32"] * 3
    assert tc.param_layout(("ptr", "i32", "i32") * 3)[-1] == (44, 4)
