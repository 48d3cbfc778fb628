"""`gputop report FILE --html PAGE`: the report as one self-contained page to keep, share or
attach: the charts (``report_charts``) inline as SVG, the findings and captures beside them.

Static: no script at all, and a Content-Security-Policy that lets the page load nothing, so it
opens offline and a crafted recording cannot make it fetch or run anything. Every text from
the recording is escaped and cut to ``TEXT_MAX``; a list longer than ``LIST_MAX`` says how many
it left out. The numbers are the text report's (``record/report.build_report``): one source.
"""

from __future__ import annotations

import html
import shlex
from collections.abc import Callable, Sequence
from typing import Any

from gputop.model.durations import duration_text
from gputop.render.budget import stacked
from gputop.render.compare import grouped, shift_line
from gputop.render.verdict import said_html, said_of_entry

TEXT_MAX = 500
"""Characters of one text from the recording (a command line, a lever, a folder)."""
LIST_MAX = 50
"""Items of one list (findings, evidence, captures, verdict changes) the page shows."""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
"""Nothing loads: no script, no font, no image but inline data, no request of any kind."""

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1100px;
       color: #1d1d1d; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.2em; margin-top: 1.6em;
border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 2px 10px 2px 0; text-align: left;
vertical-align: top; } th { font-weight: 600; }
figure { margin: 1em 0; } figure svg { max-width: 100%; height: auto; }
.meta { color: #555; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.finding { border-left: 4px solid #d1495b; padding: 0.2em 0.8em; margin: 1em 0;
background: #fafafa; } .against { color: #777; } code { font-size: 0.95em; }
.more { color: #777; font-style: italic; }
"""


def text(value: Any, limit: int = TEXT_MAX) -> str:
    """A value from the recording as HTML text: cut to ``limit`` characters, then escaped."""
    s = "" if value is None else str(value)
    if len(s) > limit:
        s = s[:limit] + f"... ({len(s) - limit:,} characters more)"
    return html.escape(s, quote=True)


def _list(items: Sequence[Any], each: Callable[[Any], str], what: str) -> list[str]:
    out = [each(x) for x in items[:LIST_MAX]]
    if len(items) > LIST_MAX:
        out.append(f'<p class="more">{len(items) - LIST_MAX:,} more {what} left out '
                   "(gputop report --json has them all)</p>")  # fmt: skip
    return out


def build_page(doc: dict[str, Any], charts: Sequence[tuple[str, str]] | None) -> str:
    """The whole page: ``doc`` is build_report's document, ``charts`` (id, SVG) pairs (None:
    leave the charts out)."""
    r = doc["recording"]
    command = r["command"]
    if isinstance(command, list):
        command = shlex.join(str(c) for c in command)
    what = command or (f"pid {r['pid']}" if r["pid"] else "the GPUs")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>gputop report: {text(r['path'], 120)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f'<h1>gputop report</h1><p class="meta">{text(r["path"])}</p>',
        '<table class="meta" id="recording">',
        f"<tr><th>what</th><td>{text(r['mode'] or 'session')} of "
        f"<code>{text(what)}</code></td></tr>",
        f"<tr><th>host</th><td>{text(r['hostname'] or '?')}</td></tr>",
        f"<tr><th>started</th><td>{text(r['started'] or '?')}, "
        f"{text(duration_text(r['duration_s']))}</td></tr>",
    ]
    if r["gpus"]:
        sim = f" (SIMULATED: {text(r['simulated'], 80)})" if r["simulated"] else ""
        parts.append(f"<tr><th>GPUs</th><td>{len(r['gpus'])} x {text(r['gpus'][0], 120)}{sim}"
                     "</td></tr>")  # fmt: skip
    if r["damage"]:
        parts.append(f"<tr><th>note</th><td>the file {text(r['damage'])}</td></tr>")
    parts.append("</table>")
    parts += _verdicts(doc)
    parts += _charts(charts)
    parts += _steps(doc["ranks"], doc["straggler"])
    parts += _throttle(doc["throttle"])
    parts += _findings(doc["findings"])
    parts += _captures(doc["captures"])
    parts += _shifts(doc.get("shifts") or [])
    parts += _exits(doc["exits"])
    parts.append(f'<p class="meta">made by gputop {text(doc["gputop_version"], 40)} from a '
                 f"recording by gputop {text(r['recorded_by'], 40)}</p>")  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _verdicts(doc: dict[str, Any]) -> list[str]:
    out = ['<h2 id="verdicts">Time per verdict</h2>']
    if not doc["verdicts"]:
        return [*out, "<p>no verdict was recorded</p>"]
    out.append("<table>")
    out += _list(doc["verdicts"], lambda v: (
        f"<tr><td>{text(v['bound'], 80)}</td><td class=\"num\">{text(duration_text(v['seconds']))}"
        f"</td><td class=\"num\">{v['share']:.1%}</td></tr>"), "verdicts")  # fmt: skip
    out.append("</table>")
    job = (doc.get("budget") or {}).get("job")
    if job:
        out.append(f"<p>The job's step-time budget over the session: {text(stacked(job, 200))}</p>")
    return out


def _ms(seconds: Any) -> str:
    return f"{seconds * 1e3:.1f} ms" if isinstance(seconds, int | float) else "-"


def _steps(ranks: Sequence[dict[str, Any]], straggler: dict[str, Any] | None) -> list[str]:
    out = ['<h2 id="steps">Steps per rank</h2>']
    if not ranks:
        return [*out, "<p>no agent reported steps (gputop run, or import gputop.agent)</p>"]
    out.append('<table><tr><th>rank</th><th class="num">steps</th><th class="num">median</th>'
               '<th class="num">p90</th><th class="num">steps/s</th><th class="num">MFU</th>'
               "<th>top phases</th></tr>")  # fmt: skip

    def row(r: dict[str, Any]) -> str:
        mfu = (r["mfu"] or {}).get("value")
        top = ", ".join(f"{k} {v:.0%}" for k, v in list(r["phases"].items())[:4])
        rate = f"{r['steps_per_s']:.2f}" if r["steps_per_s"] else "-"
        return (f"<tr><td>{text(r['rank'], 20)}</td><td class=\"num\">{r['steps']:,}</td>"
                f"<td class=\"num\">{_ms(r['step_s_median'])}</td>"
                f"<td class=\"num\">{_ms(r['step_s_p90'])}</td><td class=\"num\">{rate}</td>"
                f"<td class=\"num\">{f'{mfu:.1%}' if isinstance(mfu, float) else '-'}</td>"
                f"<td>{text(top, 200)}</td></tr>")  # fmt: skip

    out += _list(ranks, row, "ranks")
    out.append("</table>")
    if straggler is not None:
        out.append(f"<p>Straggler: rank {text(straggler['rank'], 20)} works "
                   f"{straggler['work_vs_median']:.2f}x the median rank "
                   f"(+{straggler['excess_of_step']:.0%} of the median step); the others wait "
                   "for it</p>")  # fmt: skip
    return out


def _throttle(reasons: Sequence[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="throttle">Clock-event reasons</h2>']
    if not reasons:
        return [*out, "<p>none recorded</p>"]
    out.append('<table><tr><th>reason</th><th class="num">the most affected GPU</th>'
               '<th class="num">share</th><th class="num">GPUs</th></tr>')  # fmt: skip
    out += _list(reasons, lambda t: (
        f"<tr><td>{text(t['reason'], 64)}</td>"
        f"<td class=\"num\">{text(duration_text(t['seconds']))}</td>"
        f"<td class=\"num\">{t['share']:.1%}</td><td class=\"num\">{t['gpus']}</td></tr>"),
        "reasons")  # fmt: skip
    out.append("</table>")
    return out


def _charts(charts: Sequence[tuple[str, str]] | None) -> list[str]:
    if charts is None:  # --no-charts
        return []
    out = ['<h2 id="charts">Charts</h2>']
    if not charts:
        return [*out, "<p>nothing was recorded to chart</p>"]
    for name, svg in charts:  # drawn by matplotlib from numbers: no text of the recording's own
        out.append(f'<figure id="chart-{html.escape(name)}">{svg}</figure>')
    return out


def _findings(findings: Sequence[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="findings">Findings</h2>']
    if not findings:
        return [*out, "<p>no bound led at any time</p>"]
    return out + _list(findings, _finding, "findings")


def _finding(f: dict[str, Any]) -> str:
    conf = f["confidence"]
    conf_text = f"{conf:.0%}" if isinstance(conf, int | float) else "?"
    led = "beside the principal" if f.get("beside") else f"led {text(duration_text(f['seconds']))}"
    out = [
        f'<div class="finding"><h3>{text(f["bound"], 80)}</h3>',
        f"<p>confidence {conf_text}, {led}: {text(f['summary'])}</p>",
        *said_html(said_of_entry(f), escape=text, bounded=_list),
        "</div>",
    ]
    return "\n".join(out)


def _captures(captures: Sequence[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="captures">Captures</h2>']
    if not captures:
        return [*out, "<p>no capture was taken</p>"]
    out.append("<table><tr><th>at</th><th>kind</th><th>pid</th><th>status</th><th>folder</th></tr>")
    out += _list(captures, lambda c: (
        f"<tr><td class=\"num\">{text(c['t_s'], 20)} s</td><td>{text(c['kind'], 40)}</td>"
        f"<td>{text(c['pid'], 20)}</td><td>{text(c['status'], 40)}"
        + (f": {text(c['reason'])}" if c.get("reason") else "")
        + f"</td><td><code>{text(c['folder'])}</code></td></tr>"), "captures")  # fmt: skip
    out.append("</table>")
    return out


def _shifts(shifts: Sequence[dict[str, Any]]) -> list[str]:
    """Where a rank's step time moved to a new level, as the text report says it."""
    if not shifts:
        return []
    out = ['<h2 id="shifts">Shifts of step time</h2>', "<ul>"]
    out += [f"<li>{text(x['t_s'], 20)} s: {text(shift_line(x))}</li>"
            for x in grouped(shifts)[:LIST_MAX]]  # fmt: skip
    return [*out, "</ul>"]


def _exits(exits: Sequence[dict[str, Any]]) -> list[str]:
    out = []
    for e in exits[:LIST_MAX]:
        code = e["exit_code"]
        status = f"status {text(code, 20)}" if code is not None else "status unknown"
        out.append(f"<p>the target (pid {text(e['pid'], 20)}) exited at {text(e['t_s'], 20)} s, "
                   f"{status}</p>")  # fmt: skip
    return out


def report_page(doc: dict[str, Any], with_charts: bool = True) -> str:
    """The page of a report document, its charts drawn (matplotlib imported here only)."""
    if not with_charts:
        return build_page(doc, None)
    from gputop.render.report_charts import charts

    return build_page(doc, charts(doc))
