"""NVML failures turned into one-line reasons a user can act on.

Per-field errors become "n/a" reasons (never exceptions to the caller). Failures to start NVML
at all become an ``NvmlUnavailable`` whose message says what is missing and what to do.
"""

from __future__ import annotations

import pynvml

SIM_HINT = "`gputop snapshot --sim-board h100` shows gputop on a simulated board without a GPU"


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used at all on this machine; the message is meant for the user.

    ``what`` says what is wrong without the hint, so a caller can add its own hint."""

    def __init__(self, what: str, hint: str = SIM_HINT) -> None:
        self.what = what
        super().__init__(f"{what}. {hint}." if hint else what)


def field_reason(err: BaseException, driver_version: str | None = None) -> str:
    """Why one value could not be read, in a few words."""
    if isinstance(err, pynvml.NVMLError_NotSupported):
        return "not supported on this GPU"
    if isinstance(err, pynvml.NVMLError_NoPermission):
        return "no permission (needs root or the admin's consent)"
    if isinstance(err, pynvml.NVMLError_FunctionNotFound | pynvml.NVMLLibraryMismatchError):
        return f"not in this driver ({driver_version})" if driver_version else "not in this driver"
    if isinstance(err, pynvml.NVMLError_NotFound):
        return "no data yet"
    if isinstance(err, pynvml.NVMLError_Timeout):
        return "NVML timed out"
    if isinstance(err, pynvml.NVMLError):
        return f"NVML error: {err}"
    return f"{type(err).__name__}: {err}"


def init_failure(err: BaseException) -> NvmlUnavailable:
    """The one message to show when nvmlInit (or loading the library) fails."""
    if isinstance(err, pynvml.NVMLError_LibraryNotFound):
        what = "no NVIDIA driver found (libnvidia-ml.so.1 could not be loaded)"
    elif isinstance(err, pynvml.NVMLError_DriverNotLoaded):
        what = "the NVIDIA kernel driver is not loaded (nvidia-smi fails the same way)"
    elif isinstance(err, pynvml.NVMLError_NoPermission):
        what = "no permission to open the GPU devices (/dev/nvidia*): add your user to their group"
    elif isinstance(err, pynvml.NVMLError_LibRmVersionMismatch):
        what = (
            "the NVIDIA kernel module and libnvidia-ml are different versions "
            "(a driver upgrade without a reboot): reload the driver or reboot"
        )
    elif isinstance(err, pynvml.NVMLError):
        what = f"NVML could not start: {err}"
    else:
        what = f"NVML could not start: {type(err).__name__}: {err}"
    return NvmlUnavailable(what)
