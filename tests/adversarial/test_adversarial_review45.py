"""Review 45: Tile's on-disk state that is read back and trusted -- compile-cache entries (a cubin and the ABI the
launcher packs arguments by), autotune records (which config runs), toolchain memos (which bytecode version is
written) -- against another user who can write into, or plant links in, the folders involved. Reviews 25, 28, 32 and
38 made entries self-naming and checksummed and refused FIFOs, oversized files and deep metadata, and left open "a
cache folder an attacker can write can still plant an ABI (entries are not signed)". This closes it the way ssh and
gpg treat their folders (`tile.compiler._trust`). Each hole's test names it and failed before its fix.

Holes found and fixed:

- Planted entry in a folder others can write: a cache root, a folder under it, or a folder above it (a parent that is
  world-writable and not sticky lets its writers rename the cache away and put theirs in its place) that group or
  others can write, or an entry file owned by another user, was read and its ABI trusted. Now every folder from ``/``
  to the root must be yours or root's and not writable by others (unless sticky, like ``/tmp``), the root, its
  folders and the file yours and not group/world-writable (group only if it is your private group); anything else is
  a miss with one `tile.compiler.CacheTrustWarning` naming the path and what to do.
- Links: an entry that is a symlink to a file elsewhere, or a shard folder that is a symlink to a folder elsewhere,
  was followed and its entry loaded; so was a cache root reached through a link another user planted (``/tmp/c``
  made a link to a folder of theirs, or to one of yours they want written into): links on the way to the root must
  be yours or root's now. The walk now opens each name relative to its parent's descriptor with
  ``O_NOFOLLOW``, so a name swapped for a link between a check and an open cannot redirect it either.
- Writes through links: `DiskCache.put` wrote its temporary file with ``open(tmp, "wb")`` at a predictable name
  (pid, thread id), so a link planted there made Tile truncate and overwrite any file the user can write; a shard
  folder that is a link made it write into another folder; the ``.build-XX.lock`` file was opened with ``a+b``
  through a link (creating the target). Temporary files are now created ``O_CREAT | O_EXCL | O_NOFOLLOW`` in a
  checked folder and renamed over the entry; the lock ``O_NOFOLLOW``.
- Modes: folders and files were made with the umask's modes (0777/0666 under ``umask 0``), so another user could
  write them. Folders are made 0700 and files 0600 now, whatever the umask.
- `tile cache clear` / `DiskCache.entries` followed a namespace folder that is a link and deleted the ``*.entry``
  files of the folder it points to. Links are not entered now, and an untrusted cache is not listed.
- Autotune records and toolchain memos were read from any file (a link, another user's file, a world-writable folder)
  and written through links with the umask's modes; they follow the same rules now.
- Failed bytecode kept for a bug report went to ``/tmp/tile-failed/<kernel>-<arch>-<digest>.tilebc`` with
  ``write_bytes``: the name is predictable, so another user who made ``/tmp/tile-failed`` first with a link of that
  name made Tile overwrite the target. It goes to a per-user ``tile-failed-<uid>`` now, only if that folder is trusted.

`TILE_CACHE_SHARED=1` (off by default) also trusts root-owned folders and files nobody else can write: a system-wide
read-only precompiled cache. Root can replace Tile itself, so it trusts no one new; it is opt-in so a root-owned folder
is used only where meant. Without ``os.getuid`` (Windows) ownership and modes are not checked.

Tried and found solid: a sticky world-writable parent (``/tmp``) with a private cache in it is used; a root path that
is itself a link to a private folder is used (links above the root are resolved once and the real folders checked);
writing never follows a link at the entry's own name (rename replaces the link); a non-POSIX platform still round-trips
entries. These tests run as root in CI containers: root owns everything, so "another user's file" is made with
``os.chown`` to uid 65534 when root, and by pretending to be another uid (``os.getuid``) otherwise; the mode and link
tests mean the same under root. Not testable here: the private-group rule (needs a group database entry made for the
test), and a real concurrent swap race (the descriptor walk makes it moot by construction).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tile.compiler import CacheTrustWarning, DiskCache, Knobs, _toolchain, _trust
from tile.kernels import autotune

KEY = "ab" * 32
ROOT = hasattr(os, "getuid") and os.getuid() == 0
pytestmark = pytest.mark.skipif(not _trust._POSIX, reason="ownership, modes and O_NOFOLLOW are POSIX")


def _entry(store: DiskCache) -> Path:
    assert store.put("cubin", KEY, {"kernel": "k"}, {"cubin": b"\x7fELF" + bytes(64)})
    return store.path("cubin", KEY)


@pytest.fixture
def store(tmp_path: Path) -> DiskCache:
    return DiskCache(tmp_path / "cache")


@pytest.fixture
def foreign(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Make a path "another user's": chown to nobody when root, else pretend this process is another uid."""

    def make(path: Path) -> None:
        if ROOT:
            os.chown(path, 65534, 65534, follow_symlinks=False)
        else:
            real = os.getuid()
            monkeypatch.setattr(os, "getuid", lambda: real + 1)

    return make


# -- holes ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["root", "namespace", "shard"])
def test_planted_entry_in_a_folder_others_can_write_is_a_miss(store: DiskCache, where: str) -> None:
    path = _entry(store)
    folder = {"root": store.root, "namespace": path.parent.parent, "shard": path.parent}[where]
    folder.chmod(0o777)
    with pytest.warns(CacheTrustWarning, match=f"{folder}.*every user can write it.*TILE_CACHE_DIR"):
        assert store.get("cubin", KEY) is None
    assert path.exists()  # not evicted either: the folder is not ours to clean
    folder.chmod(0o700)
    assert store.get("cubin", KEY) is not None


def test_world_writable_parent_above_the_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir()
    store = DiskCache(tmp_path / "open" / "cache")
    _entry(store)
    (tmp_path / "open").chmod(0o777)  # its writers can rename "cache" away and put theirs there
    with pytest.warns(CacheTrustWarning, match="open"):
        assert store.get("cubin", KEY) is None


def test_group_writable_entry_file_is_a_miss(store: DiskCache) -> None:
    path = _entry(store)
    path.chmod(0o664)
    if ROOT:
        os.chown(path, -1, 65534)  # a shared group (nogroup), not root's own
    if _trust._private_group(path.stat().st_gid, path.stat().st_uid):
        pytest.skip("the file's group is this user's private group: group-writable is allowed then")
    with pytest.warns(CacheTrustWarning, match="group .* can write it"):
        assert store.get("cubin", KEY) is None


def test_entry_file_of_another_user_is_a_miss(store: DiskCache, foreign: Callable[[Path], None]) -> None:
    path = _entry(store)
    foreign(path)
    with pytest.warns(CacheTrustWarning, match="owned by uid"):
        assert store.get("cubin", KEY) is None


def test_entry_that_is_a_link_to_a_planted_file_is_a_miss(tmp_path: Path, store: DiskCache) -> None:
    planted = _entry(DiskCache(tmp_path / "attacker"))  # a valid entry for KEY, checksum and self-name included
    store.path("cubin", KEY).parent.mkdir(parents=True)
    store.path("cubin", KEY).symlink_to(planted)
    with pytest.warns(CacheTrustWarning, match="symbolic link"):
        assert store.get("cubin", KEY) is None
    assert store.find("cubin", KEY[:8]) is None  # (warned once per path already)


def test_shard_folder_that_is_a_link_is_a_miss(tmp_path: Path, store: DiskCache) -> None:
    planted = _entry(DiskCache(tmp_path / "attacker"))
    store.path("cubin", KEY).parent.parent.mkdir(parents=True)
    store.path("cubin", KEY).parent.symlink_to(planted.parent)
    with pytest.warns(CacheTrustWarning, match="symbolic link"):
        assert store.get("cubin", KEY) is None


def test_put_never_writes_through_a_link_at_its_temporary_name(tmp_path: Path, store: DiskCache) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = store.path("cubin", KEY)
    path.parent.mkdir(parents=True)
    (path.parent / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp").symlink_to(victim)
    store.put("cubin", KEY, {"kernel": "k"}, {"cubin": b"x"})  # fails (logged) or writes elsewhere: never the victim
    assert victim.read_bytes() == b"precious"


def test_put_into_a_shard_link_writes_nothing_elsewhere(tmp_path: Path, store: DiskCache) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    path = store.path("cubin", KEY)
    path.parent.parent.mkdir(parents=True)
    path.parent.symlink_to(elsewhere)
    with pytest.warns(CacheTrustWarning, match="symbolic link"):
        assert not store.put("cubin", KEY, {"kernel": "k"}, {"cubin": b"x"})
    assert list(elsewhere.iterdir()) == []


def test_build_lock_is_not_opened_through_a_link(tmp_path: Path, store: DiskCache) -> None:
    target = tmp_path / "created-by-tile"
    store.base.mkdir(parents=True)
    (store.base / f".build-{KEY[:2]}.lock").symlink_to(target)
    with store.building(KEY):
        pass
    assert not target.exists()


def test_new_folders_and_files_are_private_whatever_the_umask(store: DiskCache) -> None:
    old = os.umask(0)
    try:
        path = _entry(store)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    for folder in (store.root, store.base, path.parent.parent, path.parent):
        assert folder.stat().st_mode & 0o777 == 0o700, folder


def test_clear_does_not_follow_a_namespace_link(tmp_path: Path, store: DiskCache) -> None:
    victim = tmp_path / "victim"
    (victim / "ab").mkdir(parents=True)
    (victim / "ab" / "keep.entry").write_text("not Tile's")
    _entry(store)
    (store.base / "evil").symlink_to(victim)
    assert store.clear() == 1
    assert (victim / "ab" / "keep.entry").exists()


def test_autotune_records_in_a_folder_others_can_write_are_ignored(tmp_path: Path) -> None:
    key, configs = {"n": 1}, [autotune.Config.of(B=1), autotune.Config.of(B=2)]
    calls: list[int] = []

    def timer(fn: object) -> float:
        calls.append(1)
        return 1.0

    tuner = autotune.Autotuner("fam", source="s", timer=timer, cache_dir=tmp_path / "at")
    tuner.choose(key, configs, configs[0], lambda c: None)
    assert tuner.path is not None
    assert tuner.path.stat().st_mode & 0o777 == 0o600
    # plant a record choosing configs[1] (as another user who can write the folder would)
    data = json.loads(tuner.path.read_text())
    data["records"][next(iter(data["records"]))]["config"] = {"B": 2}
    tuner.path.write_text(json.dumps(data))
    tuner.path.parent.chmod(0o777)
    fresh = autotune.Autotuner("fam", source="s", timer=timer, cache_dir=tmp_path / "at")
    with pytest.warns(CacheTrustWarning, match="every user can write it"):
        chosen = fresh.choose(key, configs, configs[0], lambda c: None)
    assert chosen == configs[0]  # re-tuned, the planted choice ignored
    assert fresh.tuned == 1
    tuner.path.parent.chmod(0o700)
    assert (
        autotune.Autotuner("fam", source="s", timer=timer, cache_dir=tmp_path / "at").choose(
            key, configs, configs[0], lambda c: None
        )
        == configs[1]
    )  # the same file in a private folder is used: the refusal above is the trust check


def test_autotune_records_link_is_ignored(tmp_path: Path) -> None:
    configs = [autotune.Config.of(B=1), autotune.Config.of(B=2)]
    planted = autotune.Autotuner("fam", source="s", timer=lambda fn: 1.0, cache_dir=tmp_path / "attacker")
    planted.choose({"n": 1}, configs[1:], configs[1], lambda c: None)
    (tmp_path / "at" / "v1").mkdir(parents=True)
    assert planted.path is not None
    (tmp_path / "at" / "v1" / "fam.json").symlink_to(planted.path)
    tuner = autotune.Autotuner("fam", source="s", timer=lambda fn: 1.0, cache_dir=tmp_path / "at")
    with pytest.warns(CacheTrustWarning, match="symbolic link"):
        assert tuner.choose({"n": 1}, configs, configs[0], lambda c: None) == configs[0]
    assert tuner.tuned == 1


def test_toolchain_memo_from_a_folder_others_can_write_is_ignored(tmp_path: Path) -> None:
    settings = Knobs(cache_dir=tmp_path / "c")
    toolchain = _toolchain.Toolchain(Path("/x/tileiras"), "test", "13.1", "V13.1", ((13, 1),))
    _toolchain._write_memo(settings, "m.json", toolchain)
    assert _toolchain._read_memo(settings, "m.json", Path("/x/tileiras"), "test") == toolchain
    (tmp_path / "c" / "toolchains").chmod(0o777)
    with pytest.warns(CacheTrustWarning):
        assert _toolchain._read_memo(settings, "m.json", Path("/x/tileiras"), "test") is None


def test_failed_bytecode_is_not_written_through_a_planted_link(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    planted = tmp_path / "planted"  # a folder another user made, world-writable, with links named like our file
    planted.mkdir()
    planted.chmod(0o777)
    digest = hashlib.sha256(b"bc").hexdigest()[:12]
    (planted / f"k-sm_90-{digest}.tilebc").symlink_to(victim)
    (tmp_path / "tmp" / "tile-failed").symlink_to(planted)
    kept = _toolchain.keep_failed_input(b"bc", "k", "sm_90", planted)
    assert victim.read_bytes() == b"precious"
    assert kept.read_bytes() == b"bc"
    assert kept.parent.stat().st_mode & 0o777 == 0o700


def test_root_path_through_a_link_another_user_planted_is_refused(
    tmp_path: Path, foreign: Callable[[Path], None]
) -> None:
    _entry(DiskCache(tmp_path / "real"))  # a private folder the link points at (the victim's own, say)
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    foreign(tmp_path / "alias")
    with pytest.warns(CacheTrustWarning, match="alias"):
        assert DiskCache(tmp_path / "alias").get("cubin", KEY) is None


# -- held -----------------------------------------------------------------------------------------------------------


def test_private_cache_under_a_sticky_world_writable_parent_is_used(tmp_path: Path) -> None:
    (tmp_path / "sticky").mkdir()
    (tmp_path / "sticky").chmod(0o1777)
    store = DiskCache(tmp_path / "sticky" / "cache")
    _entry(store)
    assert store.get("cubin", KEY) is not None


def test_root_path_that_is_a_link_to_a_private_folder_is_used(tmp_path: Path) -> None:
    _entry(DiskCache(tmp_path / "real"))
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    assert DiskCache(tmp_path / "alias").get("cubin", KEY) is not None


def test_put_replaces_a_link_at_the_entry_name_not_its_target(tmp_path: Path, store: DiskCache) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    path = store.path("cubin", KEY)
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    _entry(store)
    assert victim.read_bytes() == b"precious"
    assert not path.is_symlink()
    assert store.get("cubin", KEY) is not None


@pytest.mark.skipif(not ROOT, reason="only root can make the root-owned folder a shared cache is")
def test_shared_knob_trusts_a_root_owned_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _entry(DiskCache(tmp_path / "system"))  # made by root, as `tile compile --cache-dir` run by an admin would
    monkeypatch.setattr(os, "getuid", lambda: 12345)  # read by an ordinary user
    with pytest.warns(CacheTrustWarning, match="owned by uid 0"):
        assert DiskCache(tmp_path / "system").get("cubin", KEY) is None
    assert DiskCache(tmp_path / "system", shared=True).get("cubin", KEY) is not None
    assert Knobs().cache_shared is False


def test_shared_knob_is_parsed() -> None:
    from tile.compiler import KnobError, knobs

    assert knobs({"TILE_CACHE_SHARED": "1"}).cache_shared is True
    assert knobs({}).cache_shared is False
    with pytest.raises(KnobError, match="TILE_CACHE_SHARED"):
        knobs({"TILE_CACHE_SHARED": "maybe"})


def test_without_posix_calls_entries_still_round_trip(store: DiskCache, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_trust, "_POSIX", False)
    _entry(store)
    assert store.get("cubin", KEY) is not None
    assert store.find("cubin", KEY[:6]) is not None
