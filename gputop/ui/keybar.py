"""The key bar under the screen, laid out for its width. Pure.

Textual's footer draws every key in a row and the terminal's edge cuts the rest (at 80
columns it stopped at "s Sav": none of the capture keys showed). Here keys come in order of
importance; when they do not all fit, those that cannot work now go first, then the least
important, and the bar ends with the help key's "more keys", where every key is listed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from gputop.ui.gpu_text import StyleFor

MORE = "more keys"
KEY_NAMES = {
    "question_mark": "?",
    "plus": "+",
    "minus": "-",
    "equals_sign": "=",
    "enter": "⏎",
    "left": "←",
    "right": "→",
    "left_square_bracket": "[",
    "right_square_bracket": "]",
}


@dataclass(frozen=True)
class KeyItem:
    """One entry of the bar: its key(s) as shown, what it does, and why it cannot work now."""

    keys: str
    label: str
    reason: str | None = None
    help: bool = False
    """The help key: the one "more keys" names when the bar cannot hold everything."""


def key_name(keys: str) -> str:
    """The first of a binding's keys ("question_mark,f1" -> "?"), as a person types it."""
    first = keys.split(",")[0].strip()
    if first.startswith("ctrl+"):
        return "^" + KEY_NAMES.get(first[5:], first[5:])
    return KEY_NAMES.get(first, first)


def _width(items: Sequence[KeyItem], gap: int) -> int:
    return sum(len(i.keys) + 1 + len(i.label) for i in items) + gap * max(0, len(items) - 1)


def layout(items: Sequence[KeyItem], width: int) -> tuple[list[KeyItem], KeyItem | None]:
    """The items shown, in order, and the "more keys" hint when some were left out."""
    items = list(items)
    for gap in (2, 1):
        if _width(items, gap) <= width:
            return items, None
    helper = next((i for i in items if i.help), None)
    more = KeyItem(helper.keys if helper else "?", MORE)
    usable = [i for i in items if i.reason is None and not i.help]
    room = width - len(more.keys) - 1 - len(MORE) - 1
    shown: list[KeyItem] = []
    for item in usable:
        if _width([*shown, item], 1) <= room:
            shown.append(item)
    return shown, more


def key_bar(items: Sequence[KeyItem], width: int, style: StyleFor) -> Text:
    """The bar as one styled line: keys bold, labels plain, keys that cannot work now dim."""
    shown, more = layout(items, width)
    gap = "  " if more is None and _width(shown, 2) <= width else " "
    out = Text(no_wrap=True)
    for n, item in enumerate([*shown, *([more] if more else [])]):
        if n:
            out.append(gap)
        dim = item.reason is not None
        out.append(item.keys, style=style("dim" if dim else "key"))
        out.append(" " + item.label, style=style("dim" if dim else "label"))
    return out
