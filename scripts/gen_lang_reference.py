"""Write docs/frontend/language-reference.md from the compiler's tables (``--check``: only compare, exit 1 on drift).

Usage, from the repository root with the packages importable::

    python scripts/gen_lang_reference.py           # rewrite the page
    python scripts/gen_lang_reference.py --check   # fail when the committed page is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the lang_reference package beside this script

from lang_reference.render import PAGE, GenError, render

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with ``--check`` compare) the page; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    try:
        text = render()
    except GenError as err:
        print(err, file=sys.stderr)
        return 1
    page = ROOT / PAGE
    if args.check:
        if page.exists() and page.read_text(encoding="utf-8") == text:
            return 0
        print(f"{PAGE} is out of date: run python scripts/gen_lang_reference.py", file=sys.stderr)
        return 1
    page.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
