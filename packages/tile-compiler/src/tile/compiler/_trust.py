"""Who may have written a cache file: Tile reads back on-disk state only from folders nobody else can write.

Checksums and self-naming entries (`tile.compiler.DiskCache`) catch torn or swapped files, not planted ones: whoever
can write the cache folder can plant a valid entry, a cubin with an ABI the launcher trusts. So, as ssh and gpg do
for their folders, Tile reads or writes a compile-cache entry, an autotune record or a toolchain memo only when:

* every folder from ``/`` down to the cache root is owned by you or by root and is not writable by group or others
  (unless it is sticky, like ``/tmp``);
* the root, every folder below it and the file itself are owned by you and are not writable by others, nor by their
  group unless it is your private group (its only member is you: the usual umask 002 setup);
* no symbolic link is followed at or below the root: the walk opens each name with ``O_NOFOLLOW`` relative to its
  parent's descriptor, so a name swapped for a link between a check and an open cannot redirect it. Links in the
  root's own path are resolved once, and the resolved folders are what is checked.

Anything else is a miss, with one `CacheTrustWarning` per folder and reason that says what to do. Writes make folders
0700 and files 0600, through a temporary file created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` in the entry's own
folder and renamed over the entry, so a planted link never makes Tile write, truncate or create a file elsewhere.

``TILE_CACHE_SHARED=1`` also trusts folders and files owned by root that nobody else can write: a system-wide,
read-only precompiled cache (``tile compile --cache-dir`` run as root). Root can replace Tile itself, so this trusts
no one new; it is opt-in so that a root-owned folder is used only where it is meant to be. Without ``os.getuid`` or
descriptor-relative calls (Windows), ownership and modes are not checked and plain paths are used.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import stat
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

from tile.compiler._errors import TileError

__all__ = ["CacheTrustWarning", "TrustedDir", "trusted_dir"]

_POSIX = hasattr(os, "getuid") and os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = getattr(os, "O_PATH", os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


class CacheTrustWarning(TileError, UserWarning):  # noqa: N818  (a warning, issued, never raised)
    """A cache folder or file was not used because someone other than you could have written it.

    The message names the path, why it is not trusted and what to do; Tile treats it as a cache miss (and writes
    nothing there), so the program still runs, only without that cache."""


class UntrustedError(TileError):
    """Internal: ``path`` is not trusted for ``reason`` (turned into a warning and a miss)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path, self.reason = path, reason


def warn_refused(refused: UntrustedError) -> None:
    """Issue the `CacheTrustWarning` for ``refused`` once per path and reason in this process."""
    with _WARNED_LOCK:
        if (refused.path, refused.reason) in _WARNED:
            return
        _WARNED.add((refused.path, refused.reason))
    warnings.warn(
        CacheTrustWarning(
            f"tile: not using the cache at {refused.path}: {refused.reason}, so someone else could have planted code "
            "there. Tile only reads and writes caches that nobody else can write (as ssh does for ~/.ssh). To fix it, "
            "make the folder yours and private (`chown -R $USER` it, `chmod -R go-w` it) and remove what you did not "
            "write (`tile cache clear`), or point TILE_CACHE_DIR at a private folder; for a read-only cache owned by "
            "root shared by all users, set TILE_CACHE_SHARED=1"
        ),
        stacklevel=4,
    )


@functools.lru_cache(maxsize=32)
def _private_group(gid: int, owner: int) -> bool:
    """Whether group ``gid`` has no member but ``owner`` (as a supplementary member or by primary group)."""
    try:
        import grp
        import pwd

        group, name = grp.getgrgid(gid), pwd.getpwuid(owner).pw_name
        primary = {p.pw_uid for p in pwd.getpwall() if p.pw_gid == gid}
    except (ImportError, KeyError, OSError):
        return False
    return set(group.gr_mem) <= {name} and primary <= {owner} and bool(primary or group.gr_mem)


def problem(info: os.stat_result, *, above: bool, shared: bool) -> str | None:
    """Why a file or folder with status ``info`` is not trusted, or None; ``above``: a folder above the root."""
    uid = os.getuid()
    if info.st_uid != uid and not ((above or shared) and info.st_uid == 0):
        return f"it is owned by uid {info.st_uid}, not by you (uid {uid})"
    if above and info.st_mode & stat.S_ISVTX:
        return None  # a sticky folder (/tmp): others may add names in it, not rename or remove ours
    if info.st_mode & 0o002:
        return "every user can write it"
    if info.st_mode & 0o020 and not _private_group(info.st_gid, info.st_uid):
        return f"group {info.st_gid} can write it"
    return None


class TrustedDir:
    """A folder reached by a checked walk (a descriptor on POSIX, a path elsewhere); use as a context manager."""

    def __init__(self, fd: int | None, path: Path, shared: bool) -> None:
        self.fd, self.path, self.shared = fd, path, shared

    def __enter__(self) -> TrustedDir:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def child(self, name: str, *, create: bool) -> TrustedDir:
        """The sub-folder ``name`` (made 0700 when ``create``); OSError if absent, `UntrustedError` if not trusted."""
        path = self.path / name
        if self.fd is None:
            if create:
                path.mkdir(mode=0o700, exist_ok=True)
            if not path.is_dir():
                raise NotADirectoryError(str(path))
            return TrustedDir(None, path, self.shared)
        fd = _step(self.fd, name, str(path), create=create, above=False, shared=self.shared)
        return TrustedDir(fd, path, self.shared)

    def read(self, name: str, limit: int) -> bytes | None:
        """The bytes of the regular file ``name`` if trusted and at most ``limit`` bytes; None if not (OSError if
        absent). A FIFO or device is never opened for reading (no blocking), a link never followed."""
        flags = os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW | _CLOEXEC
        try:
            fd = (
                os.open(name, flags, dir_fd=self.fd) if self.fd is not None else os.open(self.path / name, flags, 0o600)
            )
        except OSError as exc:
            raise self._link(name, exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
                return None
            if self.fd is not None and (reason := problem(info, above=False, shared=self.shared)):
                raise UntrustedError(str(self.path / name), reason)
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(limit + 1)
            return data if len(data) <= limit else None
        finally:
            os.close(fd)

    def touch(self, name: str) -> None:
        """Refresh the mtime of ``name`` (a link's own, never its target's); never fails."""
        with contextlib.suppress(OSError, NotImplementedError):
            if self.fd is not None:
                os.utime(name, dir_fd=self.fd, follow_symlinks=False)
            else:
                os.utime(self.path / name)

    def mtime(self, name: str) -> int:
        """The mtime of ``name`` in nanoseconds (of a link itself), 0 if it has none."""
        try:
            if self.fd is not None:
                return os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mtime_ns
            return os.stat(self.path / name).st_mtime_ns
        except OSError:
            return 0

    def write(self, name: str, data: bytes) -> None:
        """Replace ``name`` atomically with ``data`` (a new 0600 file; a link at ``name`` is replaced, not followed)."""
        tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        fd = (
            os.open(tmp, flags, 0o600, dir_fd=self.fd)
            if self.fd is not None
            else os.open(self.path / tmp, flags, 0o600)
        )
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            if self.fd is not None:
                os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
            else:
                os.replace(self.path / tmp, self.path / name)
        except BaseException:
            self.unlink(tmp)
            raise

    def open_lock(self, name: str) -> int:
        """A descriptor on the lock file ``name`` (created 0600; never through a link)."""
        flags = os.O_RDWR | os.O_CREAT | _NOFOLLOW | _CLOEXEC
        return (
            os.open(name, flags, 0o600, dir_fd=self.fd)
            if self.fd is not None
            else os.open(self.path / name, flags, 0o600)
        )

    def unlink(self, name: str) -> bool:
        """Remove ``name`` from this folder (a link itself, never its target); False if it could not."""
        try:
            os.unlink(name, dir_fd=self.fd) if self.fd is not None else os.unlink(self.path / name)
        except OSError:
            return False
        return True

    def names(self) -> list[str]:
        """The names in this folder."""
        if self.fd is None:
            return os.listdir(self.path)
        fd = os.open(".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC, dir_fd=self.fd)
        try:
            return os.listdir(fd)
        finally:
            os.close(fd)

    def _link(self, name: str, exc: OSError) -> OSError | UntrustedError:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            return UntrustedError(str(self.path / name), "it is a symbolic link (Tile follows none in its cache)")
        return exc


def _step(parent: int, name: str, path: str, *, create: bool, above: bool, shared: bool) -> int:
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent)
        fd = os.open(name, _DIR, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode):
            raise UntrustedError(path, "it is a symbolic link (Tile follows none in its cache)") from None
        raise
    try:
        if reason := problem(os.fstat(fd), above=above, shared=shared):
            raise UntrustedError(path, reason)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_links(path: Path, shared: bool) -> None:
    """Refuse a link on the way to the root that another user owns (one planted in /tmp to redirect the cache)."""
    for here in (*reversed(path.parents), path):
        try:
            info = os.lstat(here)
        except OSError:
            return  # the rest does not exist yet
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in (os.getuid(), 0):
            raise UntrustedError(str(here), f"it is a symbolic link owned by uid {info.st_uid}, not by you or root")


@contextlib.contextmanager
def trusted_dir(
    root: Path, parts: Sequence[str] = (), *, create: bool = False, shared: bool = False
) -> Iterator[TrustedDir]:
    """The folder ``root/parts...`` after checking every folder from ``/`` down (see the module docstring).

    Raises `UntrustedError` when one is not trusted, OSError when one is missing (``create`` makes them 0700)."""
    if not _POSIX:
        if create:
            Path(root).mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = TrustedDir(None, Path(root), shared)
        for name in parts:
            folder = folder.child(name, create=create)
        yield folder
        return
    _check_links(Path(os.path.abspath(root)), shared)
    real = Path(os.path.realpath(root))
    here, names = Path("/"), real.parts[1:]
    fd = os.open("/", _DIR)
    try:
        if reason := problem(os.fstat(fd), above=bool(names), shared=shared):
            raise UntrustedError("/", reason)
        for i, name in enumerate(names):
            here = here / name
            below = _step(fd, name, str(here), create=create, above=i < len(names) - 1, shared=shared)
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    folder = TrustedDir(fd, here, shared)
    try:
        for name in parts:
            below_dir = folder.child(name, create=create)
            folder.__exit__()
            folder = below_dir
        yield folder
    finally:
        folder.__exit__()
