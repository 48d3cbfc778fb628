"""`gputop diagnose`'s text: the principal's cause and levers, with the first lever's saving
only when the budget could size it."""

from __future__ import annotations

from typing import Any

from gputop.headless import render


def doc(saving: dict[str, Any] | None) -> dict[str, Any]:
    principal = {
        "bound": "hung", "confidence": 0.9, "summary": "no progress: pid 7 waits",
        "evidence": [{"text": "same stack for 30 s", "source": "stacks", "supports": True}],
        "levers": ["close the write end", "read with a deadline"],
        "cause": {"text": "pid 7 waits to read pipe:[1]", "evidence": [], "levers": []},
        "saving": saving,
    }  # fmt: skip
    verdict = {"principal": principal, "secondary": [], "inputs": []}
    return {"timeline": [], "target_exit": None, "exit_code": None, "problems": [], "mfu": None,
            "budget": None, "verdict": verdict}  # fmt: skip


def test_levers_without_a_saving_are_listed_plainly():
    text = render(doc(None))
    assert "  why: pid 7 waits to read pipe:[1]" in text
    assert "  try: close the write end\n" in text and "  try: read with a deadline\n" in text
    assert "steps/s" not in text


def test_the_first_lever_carries_the_saving():
    saving = {"share": 0.4, "speedup": 1.67, "condition": "if rank 1 matched the others"}
    lines = render(doc(saving)).splitlines()
    first = next(x for x in lines if x.startswith("  try: close"))
    second = next(x for x in lines if x.startswith("  try: read"))
    assert first.endswith("(~1.7x steps/s if rank 1 matched the others)")
    assert "steps/s" not in second


def test_each_lever_carries_its_own_saving():
    d = doc({"share": 0.4, "speedup": 1.67, "condition": "if it evaluated half as often"})
    d["verdict"]["principal"]["lever_savings"] = [
        None, {"share": 0.1, "speedup": 1.11, "condition": "if it logged in a thread"},
    ]  # fmt: skip
    lines = render(d).splitlines()
    first = next(x for x in lines if x.startswith("  try: close"))
    second = next(x for x in lines if x.startswith("  try: read"))
    assert "steps/s" not in first  # each lever's own, not the first's figure repeated
    assert second.endswith("(~1.1x steps/s if it logged in a thread)")
