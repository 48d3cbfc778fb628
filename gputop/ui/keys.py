"""The monitor's keys: its bindings (each id is what config.toml's ``[keys]`` remaps), the key
bar's entries in order of importance, and what each key does for the help screen; and
``KeyLegend``, which says where the person sees keys (the key bar, the help screen, the status
line of a key pressed in vain) what each does as mapped now and why one cannot work now.

When a key can work is the app's rule (its ``unavailable_reason``); the bar's layout for a
width is ``ui/keybar.py``'s; checking the config's ``[keys]`` is ``ui/keymap.py``'s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence

from textual.app import App
from textual.binding import Binding, BindingType

from gputop.ui.keybar import KeyItem, key_name
from gputop.ui.keymap import checked_keymap
from gputop.ui.widgets import KeyBar

BarEntry = tuple[tuple[str, ...], str]
"""One entry of the key bar: the binding ids it stands for (a pair such as j/k), its label."""
HelpRow = tuple[str, str, str, str | None]
"""One key on the help screen: its keys as mapped now, what it does, its binding id, why it
cannot work now (None: it can)."""

BINDINGS: list[BindingType] = [
    Binding("q,f10", "quit", "Quit", id="quit"),
    Binding("space,p", "pause", "Pause", id="pause"),
    Binding("question_mark,f1,h", "help", "Help", id="help"),
    Binding("j,down", "next_gpu", "Next", id="next_gpu"),
    Binding("k,up", "prev_gpu", "Prev", id="prev_gpu"),
    Binding("enter", "detail", "Detail", id="detail"),
    Binding("t", "next_theme", "Theme", id="theme"),
    Binding("plus,equals_sign", "slower", "Slower", id="interval_up"),
    Binding("minus", "faster", "Faster", id="interval_down"),
    Binding("s", "save_snapshot", "Save", id="save_snapshot"),
    Binding("v", "why", "Why", id="why"),
    Binding("d", "dump_stacks", "Dump stacks", id="dump_stacks"),
    Binding("f", "capture_flame", "Flame", id="capture_flame"),
    Binding("c", "capture_dump", "Capture", id="capture_dump"),
    Binding("r", "capture_trace", "Trace", id="capture_trace"),
    Binding("m", "capture_memory", "Memory", id="capture_memory"),
    Binding("n", "capture_nsys", "Nsys", id="capture_nsys"),
    Binding("x", "cancel_capture", "Cancel", id="cancel_capture"),
    Binding("a", "load_agent", "Load agent", id="load_agent"),
    Binding("ctrl+c", "interrupt", "Interrupt job", id="interrupt", priority=True),
]
KEY_BAR: list[BarEntry] = [
    (("quit",), "Quit"),
    (("help",), "Help"),
    (("pause",), "Pause"),
    (("next_gpu", "prev_gpu"), "GPU"),
    (("detail",), "Detail"),
    (("why",), "Why"),
    (("save_snapshot",), "Save"),
    (("interrupt",), "Interrupt"),
    (("dump_stacks",), "Dump"),
    (("capture_flame",), "Flame"),
    (("capture_dump",), "Capture"),
    (("capture_trace",), "Trace"),
    (("capture_memory",), "Memory"),
    (("capture_nsys",), "Nsys"),
    (("cancel_capture",), "Cancel"),
    (("load_agent",), "Agent"),
    (("theme",), "Theme"),
    (("interval_up", "interval_down"), "Rate"),
]
"""Most important first: at 80 columns the last ones give way to "? more keys"."""
KEY_HELP = {
    "quit": "leave gputop, restoring the terminal (F10 as in htop)",
    "pause": "freeze the display; collection goes on, nothing is lost",
    "help": "this screen",
    "next_gpu": "select the next GPU (the marked row)",
    "prev_gpu": "select the previous GPU",
    "detail": "the selected GPU in full: every value, why one is missing, charts",
    "theme": "switch to the next theme",
    "interval_up": "refresh less often (fewer bytes over ssh)",
    "interval_down": "refresh more often",
    "save_snapshot": "write the current state as JSON (the schema of `gputop snapshot`)",
    "why": "the full reasoning: every rule, fired or not, with its numbers and levers",
    "dump_stacks": "every Python thread of the target now, shown and saved to a file",
    "interrupt": "in `gputop run`: SIGINT to the job (as ctrl+c without gputop); "
    "elsewhere, or once the job has ended: quit",
    "capture_flame": "a flame graph of the target and its workers over a few seconds "
    "(py-spy) into ./gputop-captures",
    "capture_dump": "every thread's stack now, into a capture folder (text and JSON)",
    "capture_trace": "torch.profiler over 3 steps in each process with gputop's agent "
    "(a chrome trace per rank)",
    "capture_memory": "a CUDA memory snapshot over 5 steps in each process with gputop's "
    "agent (open it at pytorch.org/memory_viz)",
    "capture_nsys": "an Nsight Systems window of a job started by `gputop run --nsys`",
    "cancel_capture": "stop the running captures, keeping what they recorded",
    "load_agent": "load gputop's agent into the target and its ranks, no restart (asks first)",
}


class KeyLegend:
    """What the person is told about ``app``'s keys, as mapped now (config.toml may change
    them). ``bar`` and ``help``: the app's tables (replay adds its own keys to them);
    ``unavailable``: the app's rule, why an action cannot work now (None: it can);
    ``in_bar``/``in_help``: whether a binding id has a place on the bar/the help screen now."""

    def __init__(
        self,
        app: App,
        bar: Sequence[BarEntry],
        help: Mapping[str, str],
        unavailable: Callable[[str], str | None],
        in_bar: Callable[[str], bool],
        in_help: Callable[[str], bool],
    ) -> None:
        self.app = app
        self.bar = bar
        self.help = help
        self.unavailable = unavailable
        self.in_bar = in_bar
        self.in_help = in_help
        self._availability: tuple[str | None, ...] | None = None

    def bindings(self) -> list[Binding]:
        """The app's keys and those a subclass (replay) adds, merged as Textual merges them;
        Textual's own (they have no id) left out."""
        out: list[Binding] = []
        for cls in reversed(type(self.app).__mro__):
            found = cls.__dict__.get("BINDINGS", [])
            out += [b for b in found if isinstance(b, Binding) and b.id is not None]
        return out

    def apply_keymap(self, wanted: Mapping[str, str], where: str) -> list[str]:
        """The config's ``[keys]`` (``where``: its file), checked (``ui/keymap.py``) and given
        to Textual; one problem line per entry refused."""
        keymap, problems = checked_keymap(wanted, self.bindings(), where)
        if keymap:
            self.app.set_keymap(keymap)
        return problems

    def keys_of(self, b: Binding) -> str:
        """The keys of binding ``b`` as mapped now."""
        keymap = getattr(self.app, "_keymap", {}) or {}
        return keymap.get(b.id, b.key)

    def refusal(self, action: str) -> str | None:
        """The status line's words for a key pressed while its action cannot work ("d (Dump
        stacks): needs a target"); None when it can, or when it is not the app's action."""
        name = action.partition("(")[0]
        if not hasattr(self.app, f"action_{name}") or not (reason := self.unavailable(name)):
            return None
        for b in self.bindings():
            if b.action == name:
                return f"{key_name(self.keys_of(b))} ({b.description}): {reason}"
        return f"{name}: {reason}"

    def items(self, only: frozenset[str] | None = None) -> list[KeyItem]:
        """The key bar's entries, each with why it cannot work now; keys hidden now
        (``check_action`` False) left out; ``only``: these binding ids (the detail screen's)."""
        by_id = {b.id: b for b in self.bindings()}
        items = []
        for ids, label in self.bar:
            if only is not None and not only & set(ids):
                continue
            bindings = [by_id[i] for i in ids if i in by_id]
            if not bindings or self.app.check_action(bindings[0].action, ()) is False:
                continue
            if not self.in_bar(ids[0]):
                continue
            keys = "/".join(key_name(self.keys_of(b)) for b in bindings)
            reason = self.unavailable(bindings[0].action)
            items.append(KeyItem(keys, label, reason, help=ids == ("help",)))
        return items

    def rows(self) -> list[HelpRow]:
        """Every key for the help screen."""
        rows = []
        for b in self.bindings():
            assert b.id is not None  # bindings() keeps only those with one
            if self.in_help(b.id):
                does = self.help.get(b.id, b.description)
                rows.append((self.keys_of(b), does, b.id, self.unavailable(b.action)))
        return rows

    def show(self) -> None:
        """The key bar drawn as things are now."""
        with contextlib.suppress(Exception):  # not composed yet, or torn down
            self.app.query_one(KeyBar).show(self.items())

    def refresh(self) -> None:
        """The bar (and Textual's bindings) redrawn, only when a key became usable or
        unusable."""
        availability = tuple(self.unavailable(b.action) for b in self.bindings())
        if availability != self._availability:
            self._availability = availability
            self.app.refresh_bindings()
            self.show()
