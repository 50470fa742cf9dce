"""``python -m tile.bindings`` / ``tile-doctor``: print the environment report (``--json`` for machines)."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys

from tile.bindings._report import environment_report

__all__ = ["main"]


def _version() -> str:
    try:
        return importlib.metadata.version("tile-bindings")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed: running from a source tree)"


def main(argv: list[str] | None = None) -> int:
    """Print the environment report; exit 0, or 1 under ``--require-gpu`` when no GPU or tileiras is usable.

    Parameters
    ----------
    argv : list of str, optional
        Command-line arguments (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        The exit status (141, as for SIGPIPE, when the reader of stdout went away).
    """
    try:
        try:
            return _main(argv)
        finally:  # a closed pipe fails here, inside the handler, not at interpreter exit (--help's SystemExit too)
            sys.stdout.flush()
    except BrokenPipeError:  # `tile-doctor | head`: the reader left; say nothing more, as a shell tool would
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="tile-doctor", description="Report what Tile can use on this machine.")
    parser.add_argument("--version", action="version", version=f"%(prog)s (tile-bindings) {_version()}")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--require-gpu", action="store_true", help="exit 1 unless a GPU and tileiras are usable")
    args = parser.parse_args(argv)
    report = environment_report()
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(report)
    ready = bool(report.devices) and report.selected_tileiras is not None
    return 1 if args.require_gpu and not ready else 0


if __name__ == "__main__":
    sys.exit(main())
