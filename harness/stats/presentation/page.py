"""The report page's building blocks: its style, the script that sorts its tables, and escaped cells,
tables, figures and folds (hand-written: a page that opens with no network needs no template engine)."""

from __future__ import annotations

import base64
import html
from typing import Any

import numpy as np

STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;padding:0 1em}
table{border-collapse:collapse;margin:.6em 0}
th,td{padding:3px 8px;border-bottom:1px solid #ddd;text-align:right}
th{cursor:pointer;background:#f4f4f4}td:first-child,th:first-child{text-align:left}
.pos{color:#a40000}.sig{font-weight:bold}figure{margin:1em 0}
figcaption{font-size:12px;color:#555;max-width:800px}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;font-size:12px}details{margin:.5em 0}
h2{border-top:2px solid #ccc;padding-top:.6em}caption{caption-side:bottom;font-size:12px;color:#555}"""

SORT = """document.querySelectorAll('table.sortable th').forEach(function(th, col){
 th.addEventListener('click', function(){
  var body = th.closest('table').tBodies[0], rows = Array.from(body.rows), up = th.dataset.up !== '1';
  rows.sort(function(a, b){
   var x = a.cells[col].dataset.v || a.cells[col].textContent;
   var y = b.cells[col].dataset.v || b.cells[col].textContent;
   var nx = parseFloat(x), ny = parseFloat(y);
   var c = (isNaN(nx) || isNaN(ny)) ? x.localeCompare(y) : nx - ny;
   return up ? c : -c;});
  th.dataset.up = up ? '1' : '0';
  rows.forEach(function(r){ body.appendChild(r); });});});"""


def esc(value: Any) -> str:
    return html.escape(str(value))


def td(text: Any, value: Any, cls: str = "") -> str:
    """One cell: its text escaped (whatever file it came from), its sort value, its style class."""
    shown = f'<span class="{esc(cls)}">{esc(text)}</span>' if cls else esc(text)
    return f'<td data-v="{esc(value)}">{shown}</td>'


def table(headers: list[str], rows: list[list[tuple]], caption: str) -> str:
    """A sortable table; each cell is (shown text, sort value[, style class]), escaped here."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(td(*cell) for cell in row) + "</tr>" for row in rows)
    return (
        f'<table class="sortable"><caption>{esc(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def figure(png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode()
    img = f'<img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
    return f"<figure>{img}<figcaption>{esc(caption)}</figcaption></figure>"


def points(x: float, significant: bool = False, signed: bool = True) -> tuple[str, float, str]:
    """A difference in points (red when positive, bold when significant), its sort value and class;
    n/a where nothing measured it (a signed effect), inf where no test could see it (an MDE)."""
    if not np.isfinite(x):
        return ("inf", 1e9, "") if not signed else ("n/a", -1e9, "")
    if not signed:
        return f"{100 * x:.2f}", x, ""
    cls = " ".join(c for c, on in (("pos", x > 0), ("sig", significant)) if on)
    return f"{100 * x:+.2f}", x, cls


def details(summary_text: str, body: str) -> str:
    return f"<details><summary>{esc(summary_text)}</summary><pre>{esc(body)}</pre></details>"
