"""The config's ``[keys]`` table, checked before Textual sees it.

Textual takes any string as a key and any keymap as given: a key it can never receive
(``ctrl+ctrl+alt+q``), an empty one (``quit = ""``) or one another binding has (``help = "q"``
silently took q from quit) leaves a binding dead, quitting included. Here each such entry is
refused with one line (which entry, what is wrong, which keys it keeps) and its default kept;
``q`` always quits (as does Textual's ``ctrl+q``), whatever the file says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding
from textual.keys import _character_to_key, key_to_character
from textual.screen import Screen

from gputop.config import shown

MODIFIERS = ("ctrl", "shift", "alt", "meta")
QUIT_ID = "quit"
QUIT_KEY = "q"
"""Always quits: a remapped quit gets its new keys and keeps this one."""
NAMED_KEYS = frozenset(
    ["backspace", "delete", "down", "end", "enter", "escape", "home", "insert", "left"]
    + ["pagedown", "pageup", "right", "space", "tab", "up"]
    + [f"f{n}" for n in range(1, 25)]
)
ASCII_NAMES = frozenset(_character_to_key(chr(c)) for c in range(33, 127))
"""Printable ASCII characters by the names Textual gives them (question_mark, plus, comma)."""


def parse_key(text: str) -> str:
    """One key as Textual names it when pressed (modifiers in its order); ValueError says why
    the key can never arrive."""
    parts = [p.strip() for p in text.split("+")]
    if text.strip() in ("+", ""):
        if text.strip() == "+":
            return "plus"
        raise ValueError("no key given")
    *mods, name = parts
    if not name:
        raise ValueError(f"{shown(text)} ends in + with no key")
    mods = [m.lower() for m in mods]
    for m in mods:
        if m not in MODIFIERS:
            raise ValueError(f"{shown(m)} is not a modifier ({', '.join(MODIFIERS)})")
        if mods.count(m) > 1:
            raise ValueError(f"{m} is given twice")
    if mods and len(name) == 1 and name.isupper():  # what the terminal sends for alt+P
        mods, name = [*mods, "shift"] if "shift" not in mods else mods, name.lower()
    key = _key_name(name)
    if mods == ["shift"] and (len(name) == 1 or _names_a_character(key)):
        raise ValueError(f"shift+{name} never arrives (write the character itself, e.g. Q)")
    return "+".join([*sorted(mods), key])


def _key_name(name: str) -> str:
    if len(name) == 1:
        if not name.isprintable() or name.isspace():
            raise ValueError(f"{shown(name)} is not a key")
        # Textual names other characters itself (set_keymap), by names not all spellable back
        return _character_to_key(name) if name.isascii() else name
    lower = name.lower()
    if lower in NAMED_KEYS or _names_a_character(lower):
        return lower
    raise ValueError(f"{shown(name)} is not a key name (a character, or e.g. escape, f1, up)")


def _names_a_character(name: str) -> bool:
    """The name Textual gives a character when it is pressed (question_mark, plus,
    inverted_exclamation_mark), not another spelling of it."""
    if name in ASCII_NAMES:  # some are Textual's own short names (plus), not Unicode's
        return True
    character = key_to_character(name)
    return character is not None and _character_to_key(character) == name


def parse_keys(text: str) -> tuple[str, ...]:
    """``"key[,key...]"`` -> the keys, each once, in order."""
    keys: list[str] = []
    for part in text.split(","):
        key = parse_key(part)
        if key not in keys:
            keys.append(key)
    return tuple(keys)


@dataclass(frozen=True)
class Wish:
    """One accepted ``[keys]`` entry: the binding id, what the file said, the keys."""

    bid: str
    text: str
    keys: tuple[str, ...]


def fixed_keys() -> dict[str, str]:
    """Keys Textual itself binds (no id: they cannot be remapped; the screen's shadow the
    app's) -> their action."""
    out: dict[str, str] = {}
    for b in (*App.BINDINGS, *Screen.BINDINGS):
        if isinstance(b, Binding) and b.id is None:
            for key in b.key.split(","):
                out.setdefault(key.strip(), b.action)
    return out


def checked_keymap(
    wanted: Mapping[str, str], bindings: Iterable[Binding], where: str = ""
) -> tuple[dict[str, str], list[str]]:
    """The keymap to give Textual and one problem line per refused entry. ``bindings``: the
    app's, each with an id; ``where``: the config file, to prefix the lines."""
    ids = [(b.id, b) for b in bindings if b.id is not None]
    defaults = {bid: parse_keys(b.key) for bid, b in ids}
    actions = {bid: b.action for bid, b in ids}
    prefix = f"{where}: [keys]" if where else "[keys]"
    problems: list[str] = []
    unknown = [bid for bid in wanted if bid not in defaults]
    if unknown:
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        names = ", ".join(shown(b) for b in unknown[:5])
        problems.append(f"{prefix} unknown binding ids {names}{more} (ignored; ? lists them)")
    wishes: list[Wish] = []
    for bid, text in wanted.items():
        if bid not in defaults:
            continue
        try:
            keys = parse_keys(text)
        except ValueError as e:
            problems.append(_refused(prefix, bid, text, str(e), defaults[bid]))
            continue
        if bid == QUIT_ID and QUIT_KEY not in keys:
            keys = (*keys, QUIT_KEY)
        wishes.append(Wish(bid, text, keys))
    wishes.sort(key=lambda w: w.bid != QUIT_ID)  # quit's keys first: nothing takes them
    while clash := _first_clash(wishes, defaults, actions):
        wish, key, other = clash
        wishes.remove(wish)
        problems.append(
            _refused(prefix, wish.bid, wish.text, f"{key} is already {other}", defaults[wish.bid])
        )
    return {w.bid: ",".join(w.keys) for w in wishes}, problems


def _refused(prefix: str, bid: str, text: str, why: str, keeps: Sequence[str]) -> str:
    return f"{prefix} {bid} = {shown(text)}: {why}; keeping {','.join(keeps)}"


def _first_clash(
    wishes: list[Wish], defaults: Mapping[str, tuple[str, ...]], actions: Mapping[str, str]
) -> tuple[Wish, str, str] | None:
    """The first remapped binding (later in the file loses) with a key another binding has
    now: Textual's own, a binding left at its defaults, or one remapped before it."""
    remapped = {w.bid for w in wishes}
    owner: dict[str, str] = {}
    for bid, keys in defaults.items():
        if bid not in remapped:
            for key in keys:
                owner.setdefault(key, f"{bid}'s key")
    fixed = fixed_keys()
    for wish in wishes:
        for key in wish.keys:
            if key in owner:
                return wish, key, owner[key]
            mine = key in defaults[wish.bid] or fixed.get(key) in (None, actions[wish.bid])
            if not mine:
                return wish, key, f"Textual's own key for {fixed[key]}"
        for key in wish.keys:
            owner.setdefault(key, f"{wish.bid}'s key")
    return None
