"""The simulated GPU's physics is sane: power follows load, limits cut clocks, heat throttles."""

from __future__ import annotations

from gputop.sim.activity import (
    FULL,
    IDLE,
    REASON_GPU_IDLE,
    REASON_HW_THERMAL,
    REASON_SW_POWER_CAP,
    REASON_SW_THERMAL,
    Activity,
    DeviceState,
)
from gputop.sim.board import noise
from gputop.sim.boards import A100, H100, T4


def run(state: DeviceState, activity: Activity, seconds: float) -> DeviceState:
    for _ in range(int(seconds / 0.1)):
        state.step(activity)
    return state


def test_idle_sits_at_idle_clock_and_power_with_gpu_idle_reason():
    s = run(DeviceState(board=H100, index=0, power_limit_w=700), IDLE, 30)
    assert s.reasons == REASON_GPU_IDLE
    assert s.sm_clock == H100.idle_sm_clock
    assert abs(s.power_w - H100.idle_power) < 1e-6
    assert abs(s.temp_c - H100.idle_temp) < 0.5


def test_full_load_at_default_limit_runs_at_max_clock_without_throttling():
    s = run(DeviceState(board=H100, index=0, power_limit_w=H100.power_limit), FULL, 60)
    assert s.sm_clock == H100.max_sm_clock
    assert s.reasons == 0
    assert H100.idle_power < s.power_w <= H100.power_limit


def test_full_load_on_lowered_power_limit_caps_power_and_clock():
    limit = 0.5 * H100.power_limit
    s = run(DeviceState(board=H100, index=0, power_limit_w=limit), FULL, 60)
    assert s.reasons & REASON_SW_POWER_CAP
    assert s.sm_clock < H100.max_sm_clock
    assert s.power_w <= limit + 1e-6
    assert s.sm_clock % H100.clock_step == 0


def test_power_rises_with_activity():
    powers = []
    for sm in (0.1, 0.5, 0.9):
        a = Activity(duty=1.0, sm=sm, tensor=sm / 2, dram=0.3)
        powers.append(run(DeviceState(board=A100, index=0, power_limit_w=400), a, 5).power_w)
    assert powers[0] < powers[1] < powers[2]


def test_temperature_rises_with_a_time_constant():
    s = DeviceState(board=H100, index=0, power_limit_w=700)
    run(s, FULL, H100.thermal_tau_s)
    after_tau = s.temp_c
    run(s, FULL, 5 * H100.thermal_tau_s)
    settled = s.temp_c
    rise_fraction = (after_tau - H100.idle_temp) / (settled - H100.idle_temp)
    assert 0.55 < rise_fraction < 0.7  # 1 - 1/e after one time constant


def test_poor_cooling_reaches_thermal_slowdown():
    s = DeviceState(board=H100, index=0, power_limit_w=700, cooling=3.0)
    run(s, FULL, 600)
    assert s.temp_c > H100.temp_gpu_max - 1
    assert s.reasons & (REASON_SW_THERMAL | REASON_HW_THERMAL)
    assert s.sm_clock < H100.max_sm_clock


def test_launch_bound_load_shows_full_duty_at_low_power():
    a = Activity(duty=1.0, sm=0.1, tensor=0.0, dram=0.05)
    s = run(DeviceState(board=T4, index=0, power_limit_w=T4.power_limit), a, 10)
    assert s.power_w - T4.idle_power < 0.3 * (T4.power_limit - T4.idle_power)
    assert s.sm_clock == T4.max_sm_clock and s.reasons == 0


def test_sm_activity_cannot_exceed_duty():
    a = Activity(duty=0.2, sm=0.9, tensor=0.9, occupancy=0.9).clamped()
    assert a.sm == 0.2 and a.tensor == 0.2 and a.occupancy == 0.2


def test_counters_integrate_activity_over_time():
    s = run(DeviceState(board=H100, index=0, power_limit_w=700), Activity(duty=1, sm=0.5), 10)
    assert abs(s.counters.sm - 5.0) < 1e-6
    assert abs(s.energy_mj / 1000 / 10 - s.power_w) < 5  # energy = integral of power


def test_noise_is_deterministic_and_bounded():
    values = [noise(7, 1, 2, k) for k in range(1000)]
    assert values == [noise(7, 1, 2, k) for k in range(1000)]
    assert all(-1.0 <= v < 1.0 for v in values)
    assert abs(sum(values) / len(values)) < 0.1
    assert noise(7, 1, 2, 3) != noise(8, 1, 2, 3)
