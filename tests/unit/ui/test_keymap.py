"""The [keys] table is checked before Textual sees it: a key that can never arrive, an empty
one, or one another binding has is refused with one line and the default kept; q always quits
(issue 17 item 11). Pressing the keys is in tests/tui/test_bad_config.py."""

from __future__ import annotations

import pytest

from gputop.ui.app import GputopApp
from gputop.ui.keymap import checked_keymap, parse_key, parse_keys


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("q", "q"),
        ("Q", "Q"),
        ("?", "question_mark"),
        ("+", "plus"),
        ("question_mark", "question_mark"),
        ("F1", "f1"),
        (" ctrl+q ", "ctrl+q"),
        ("Ctrl+Shift+Up", "ctrl+shift+up"),
        ("ctrl+alt+x", "alt+ctrl+x"),  # the order Textual names a pressed key in
        ("alt+P", "alt+shift+p"),
        ("é", "é"),
    ],
)
def test_keys_are_named_as_textual_names_them_when_pressed(text, key):
    assert parse_key(text) == key


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "no key given"),
        ("ctrl+ctrl+alt+q", "ctrl is given twice"),
        ("ctrl+", "ends in + with no key"),
        ("hyper+q", "'hyper' is not a modifier"),
        ("shift+q", "shift+q never arrives"),
        ("qq", "'qq' is not a key name"),
        ("ctrl+\x01", "is not a key"),
    ],
)
def test_keys_that_can_never_arrive_are_refused_with_the_reason(text, why):
    with pytest.raises(ValueError, match=None) as e:
        parse_key(text)
    assert why in str(e.value)


def test_a_list_of_keys_names_each_once():
    assert parse_keys("q, ?,q,f1") == ("q", "question_mark", "f1")
    with pytest.raises(ValueError):
        parse_keys("q,,x")


def check(**wanted: str) -> tuple[dict[str, str], list[str]]:
    return checked_keymap(wanted, GputopApp.BINDINGS, "c.toml")


@pytest.mark.parametrize(
    ("wanted", "line"),
    [
        (
            {"quit": "ctrl+ctrl+alt+q"},
            "quit = 'ctrl+ctrl+alt+q': ctrl is given twice; keeping q,f10",
        ),
        ({"quit": ""}, "quit = '': no key given; keeping q,f10"),
        ({"help": "q"}, "help = 'q': q is already quit's key; keeping question_mark,f1,h"),
        ({"pause": "t"}, "pause = 't': t is already theme's key; keeping space,p"),
        (
            {"pause": "ctrl+q"},
            "pause = 'ctrl+q': ctrl+q is already Textual's own key for quit; keeping space,p",
        ),
        (
            {"pause": "tab"},
            "pause = 'tab': tab is already Textual's own key for app.focus_next; keeping space,p",
        ),
    ],
)
def test_each_bad_binding_is_one_line_and_keeps_its_default(wanted, line):
    keymap, problems = check(**wanted)
    assert keymap == {}
    assert problems == [f"c.toml: [keys] {line}"]


def test_quit_always_keeps_q_and_wins_a_key_over_later_entries():
    keymap, problems = check(help="x", quit="w")
    assert keymap == {"quit": "w,q"}  # x stays cancel_capture's: help is refused
    assert problems == [
        "c.toml: [keys] help = 'x': x is already cancel_capture's key; keeping question_mark,f1,h"
    ]
    keymap, problems = check(help="w", quit="w")  # quit first, whatever the file's order
    assert keymap == {"quit": "w,q"} and "help = 'w': w is already quit's key" in problems[0]


def test_swaps_and_own_keys_are_allowed():
    assert check(pause="t", theme="p") == ({"pause": "t", "theme": "p"}, [])
    assert check(interrupt="ctrl+c,i") == ({"interrupt": "ctrl+c,i"}, [])
    assert check(quit="ctrl+q") == ({"quit": "ctrl+q,q"}, [])


def test_unknown_ids_are_one_line_however_many():
    keymap, problems = checked_keymap({f"x{i}": "z" for i in range(100)}, GputopApp.BINDINGS)
    assert keymap == {}
    assert problems == [
        "[keys] unknown binding ids 'x0', 'x1', 'x2', 'x3', 'x4' and 95 more"
        " (ignored; ? lists them)"
    ]
