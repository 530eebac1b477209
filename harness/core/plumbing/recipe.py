"""A recipe table: how an implementation follows its authors' code, point by point (`methods show`,
`contamination show`)."""

from __future__ import annotations


def recipe_table(rows: list[tuple[str, str, str, str]]) -> str:
    """Rows of (what; the authors; here; what was kept different, and why), aligned under headers."""
    rows = [("what", "the authors", "here", "kept different, and why"), *rows]
    widths = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
    return "\n".join(("".join(c.ljust(w) for c, w in zip(r, widths)) + r[3]).rstrip() for r in rows)
