"""The pure parts of the GPU pane: sparklines, value judgements, the two lines of a row."""

from __future__ import annotations

from rich.style import Style

from gputop.model import DeviceInfo, GpuSample
from gputop.ui.gpu_text import (
    clock_level,
    gpu_lines,
    reasons_text,
    short_name,
    sm_active_level,
    spark,
    temp_level,
)
from gputop.ui.terminal import terminal_env
from gputop.ui.themes import ThemeError, theme_from_toml


def dev(**kw) -> DeviceInfo:
    base = dict(
        index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-x", pci_bus_id="0:1", pci_device_id=1,
        architecture="Hopper", max_sm_clock_mhz=1980, max_graphics_clock_mhz=1980,
        max_mem_clock_mhz=2619, default_power_limit_w=700.0, min_power_limit_w=200.0,
        max_power_limit_w=700.0, mem_total_bytes=80 << 30, temp_shutdown_c=95,
        temp_slowdown_c=89, temp_gpu_max_c=87, temp_mem_max_c=95, pcie_max_gen=5,
        pcie_max_width=16, nvlink_links=18, gpm_supported=True, mig_enabled=False,
    )  # fmt: skip
    return DeviceInfo(**{**base, **kw})


def sample(**kw) -> GpuSample:
    base = dict(index=0, t=1.0, wall=0.0, sm_clock_mhz=1980, power_w=600.0, power_limit_w=700.0,
                temp_c=60, util_gpu_pct=99, sm_active_pct=90.0, mem_used_bytes=60 << 30,
                reasons=())  # fmt: skip
    return GpuSample(**{**base, **kw})


def test_spark_is_fixed_scale():
    assert spark([97, 97, 97], 0, 100, 3) == "███"
    assert spark([0, 50, 100], 0, 100, 3) == "▁▅█"
    assert spark([10, None], 0, 100, 4) == "  ▁ "
    assert spark(range(100), 0, 100, 5) == spark([95, 96, 97, 98, 99], 0, 100, 5)
    assert spark([1], 0, 100, 0) == ""


def test_levels_judge_values_against_their_limits():
    d = dev()
    assert clock_level(sample(), d) == "good"
    assert clock_level(sample(sm_clock_mhz=1700), d) == "warn"
    assert clock_level(sample(sm_clock_mhz=900), d) == "bad"
    assert clock_level(sample(reasons=("gpu_idle",), util_gpu_pct=0), d) == "dim"
    assert clock_level(sample(reasons=("sw_power_cap",)), d) == "warn"
    assert temp_level(sample(temp_c=88), d) == "bad"
    assert temp_level(sample(temp_c=83), d) == "warn"
    assert temp_level(sample(temp_c=60), d) == "value"
    assert sm_active_level(sample(util_gpu_pct=100, sm_active_pct=12.0)) == "warn"
    assert sm_active_level(sample(util_gpu_pct=100, sm_active_pct=90.0)) == "value"


def test_reasons_in_words():
    assert reasons_text(sample(reasons=("sw_power_cap", "hw_thermal"))) == (
        "held: POWER CAP, HW THERMAL",
        "bad",
    )
    assert reasons_text(sample(reasons=("gpu_idle",))) == ("idle", "dim")
    assert reasons_text(sample()) == ("", "dim")


def test_two_lines_fit_80_columns():
    one, two = gpu_lines(dev(), sample(reasons=("sw_power_cap",)), lambda _: Style(), 80)
    assert len(one.plain) <= 80 and len(two.plain) <= 80
    assert "held: POWER CAP" in two.plain
    assert short_name("Tesla T4") == "T4"


def test_terminal_env_maps_colour_modes():
    assert terminal_env("16", False) == {"TEXTUAL_COLOR_SYSTEM": "standard"}
    assert terminal_env("auto", True) == {"TEXTUAL_ANIMATIONS": "none"}
    assert terminal_env("truecolor", False)["TEXTUAL_COLOR_SYSTEM"] == "truecolor"


def test_theme_files_are_validated():
    t = theme_from_toml('name = "x"\n[textual]\nprimary = "#112233"\n[gputop]\nbad = "red"\n')
    assert t.variables["gputop-bad"] == "red" and t.variables["gputop-good"] == "green"
    for text, words in [
        ('[textual]\nprimary = "#fff"', "no name"),
        ('name = "x"', "at least primary"),
        ('name = "x"\n[textual]\nprimary = "nope"', "is not a colour"),
        ('name = "x"\n[textual]\nprimary = "#fff"\nsparkle = "#fff"', "unknown [textual]"),
        ('name = "x"\n[textual]\nprimary = "#fff"\n[gputop]\nmeh = "#fff"', "unknown [gputop]"),
        ("name = ", "not valid TOML"),
    ]:
        try:
            theme_from_toml(text)
        except ThemeError as e:
            assert words in str(e)
        else:
            raise AssertionError(f"accepted: {text!r}")


def test_a_ranks_child_is_shown_as_its_child_never_as_the_rank():
    from gputop.model.stacks import Frame, ProcessStacks, StacksSample, ThreadStack
    from gputop.ui.panes.stacks import stack_lines

    frames = (Frame("flock_wait", "helper.py", 3), Frame("main", "helper.py", 9))
    helper = ThreadStack(300, "MainThread", False, frames, "blocked", frames[0])
    rank = ThreadStack(101, "MainThread", True, (Frame("main", "train.py", 5),), "user code",
                       None)  # fmt: skip
    sample = StacksSample(100, 1.0, 0.0, (
        ProcessStacks(101, "rank", (rank,), rank=0, taken=1.0),
        ProcessStacks(300, "child", (helper,), taken=1.0, of_rank=0),
    ))  # fmt: skip
    text = "\n".join(line.plain for line in stack_lines([sample], lambda s: s, 120))
    assert "101 rank 0" in text and "300 child of r0" in text, text
