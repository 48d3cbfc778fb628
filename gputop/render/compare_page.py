"""`gputop compare A B --html`: the comparison as one page in the report's style (offline,
nothing loads, every text from the files escaped)."""

from __future__ import annotations

from typing import Any

from gputop.render.compare import comparison_lines
from gputop.render.report_page import CSP, STYLE, text
from gputop.vocab import budget as b


def compare_page(doc: dict[str, Any]) -> str:
    a, bb = doc["a"], doc["b"]
    lines = comparison_lines(doc["comparison"])
    rows = [
        f"<tr><td>{text(b.NAMES.get(s['slice'], s['slice']))}</td>"
        f'<td class="num">{round(100 * s["before"])}%</td>'
        f'<td class="num">{round(100 * s["after"])}%</td>'
        f'<td class="num">±{round(100 * s["margin"])}</td></tr>'
        for s in doc["comparison"]["slices"]
    ]
    sides = [
        f"<tr><th>{name}</th><td><code>{text(s['path'])}</code></td>"
        f'<td class="num">{s["steps"]}</td><td class="num">{1000 * s["step_s"]:.4g} ms</td>'
        f"<td>{text(s['principal'] or 'no bound')}</td></tr>"
        for name, s in (("A", a), ("B", bb))
    ]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
            "<title>gputop compare</title>",
            f"<style>{STYLE}</style></head><body>",
            "<h1>gputop compare: B against A</h1>",
            "<table><tr><th></th><th>recording</th><th>steps</th><th>mean step</th>"
            "<th>verdict</th></tr>",
            *sides,
            "</table>",
            '<h2 id="change">The change</h2>',
            f"<p>{text(lines[0].replace('vs last run', 'B vs A', 1))}</p>",
            "<ul>",
            *[f"<li>{text(x.strip())}</li>" for x in lines[1:]],
            "</ul>",
            '<h2 id="slices">The slices that moved</h2>',
            "<table><tr><th>slice</th><th>A</th><th>B</th><th>interval</th></tr>",
            *rows,
            "</table>",
            f'<p class="meta">made by gputop {text(doc["gputop_version"], 40)}</p>',
            "</body></html>",
        ]
    )
