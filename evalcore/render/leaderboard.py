"""A leaderboard as a small self-contained HTML page (no scripts, no external files)."""
from __future__ import annotations

import html

import pyarrow as pa


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6f}"
    return html.escape(str(value))


def leaderboard_html(table: pa.Table, title: str) -> str:
    """One table, a row per leaderboard row; every value escaped (team names are participants' text)."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in table.column_names)
    body = "\n".join("<tr>" + "".join(f"<td>{_cell(row[name])}</td>" for name in table.column_names) + "</tr>"
                     for row in table.to_pylist())
    return (f"<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>\n"
            "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}</style></head>\n"
            f"<body><h1>{html.escape(title)}</h1>\n<table>\n<tr>{head}</tr>\n{body}\n</table></body></html>\n")
