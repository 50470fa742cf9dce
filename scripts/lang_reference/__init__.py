"""The generator of docs/frontend/language-reference.md: `render` (tables to Markdown), `sections` (hand-written
prose) and the ``snippets_*`` modules (one runnable example per op, method, annotation and entry topic).

Run ``python scripts/gen_lang_reference.py`` to rewrite the page, ``--check`` to compare it (tests do the same).
"""
