"""A stack dump as text: every Python thread of every process, innermost frame first. Shared
by the full-dump key and the py-spy dump capture."""

from __future__ import annotations

from gputop.model.stacks import ThreadStack


def dump_text(results: list[tuple[int, str, list[ThreadStack] | None, str | None]]) -> str:
    out = []
    for pid, role, threads, error in results:
        out.append(f"== pid {pid} ({role})")
        if error:
            out.append(f"   {error}")
            continue
        for t in threads or []:
            state = "active" if t.active else "waiting"
            out.append(f"-- thread {t.tid} {t.name} [{state}] phase: {t.phase}")
            for f in t.frames:
                out.append(f"     {f.name} ({f.file}:{f.line or '?'})")
        out.append("")
    return "\n".join(out) + "\n"
