"""--only and --only-visible: which GPUs are watched, from indices, UUIDs and CUDA's variable."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.model.gpu import DeviceInfo
from gputop.sources.gpu_choice import (
    GpuChoice,
    NoSuchGpu,
    chosen,
    order_note,
    parse_only,
    visible_devices,
)

UUIDS = ("GPU-8f6c1a2b-0000", "GPU-8f6c9d3e-1111", "GPU-1234abcd-2222", "GPU-77aa0000-3333")


def devices() -> list[DeviceInfo]:
    blank = {f.name: None for f in dataclasses.fields(DeviceInfo)}
    blank.update(gpm_supported=False, mig=())
    return [DeviceInfo(**{**blank, "index": i, "uuid": u}) for i, u in enumerate(UUIDS)]


def test_indices_and_uuids_comma_or_space_separated():
    choice = parse_only("3, 0 GPU-1234")
    assert chosen(devices(), choice) == (0, 2, 3)  # index order, whatever order was typed
    assert chosen(devices(), parse_only("gpu-77AA")) == (3,)  # a UUID's case does not matter
    assert chosen(devices(), None) == (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("text", "words"),
    [("", "at least one GPU"), ("0,fast", "'fast': a GPU is an index"), ("-1", "'-1'")],
)
def test_a_list_that_names_no_gpu_is_refused_with_the_reason(text, words):
    with pytest.raises(ValueError, match=words):
        parse_only(text)


def test_a_gpu_this_machine_lacks_or_an_ambiguous_uuid_is_one_line():
    with pytest.raises(NoSuchGpu, match=r"no GPU 7 on this machine \(its GPUs: 0, 1, 2, 3\)"):
        chosen(devices(), parse_only("1,7"))
    with pytest.raises(NoSuchGpu, match="GPU-8f6c starts the UUIDs of GPUs 0, 1: give more"):
        chosen(devices(), parse_only("GPU-8f6c"))
    with pytest.raises(NoSuchGpu, match="no GPU's UUID starts with GPU-ffff"):
        chosen(devices(), parse_only("GPU-ffff"))
    with pytest.raises(NoSuchGpu, match="a MIG instance"):
        chosen(devices(), parse_only("MIG-1234"))


def test_cuda_visible_devices_as_cuda_reads_it():
    assert visible_devices({}) is None  # unset: every GPU
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "2,0"}).words == ("2", "0")
    # CUDA stops at the first entry it cannot read: what follows is hidden too
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "1,x,3"}).words == ("1",)
    assert visible_devices({"CUDA_VISIBLE_DEVICES": "-1"}).words == ()
    assert visible_devices({"CUDA_VISIBLE_DEVICES": ""}).words == ()
    assert chosen(devices(), visible_devices({"CUDA_VISIBLE_DEVICES": ""})) == ()


def test_the_order_note_only_when_cuda_indices_may_not_be_nvmls():
    by_index = GpuChoice(("1",), "CUDA_VISIBLE_DEVICES")
    assert "PCI_BUS_ID" in order_note(by_index, {})
    assert order_note(by_index, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) is None
    assert order_note(GpuChoice(("GPU-1234",), "CUDA_VISIBLE_DEVICES"), {}) is None
    assert order_note(parse_only("1"), {}) is None  # --only takes nvidia-smi's indices
