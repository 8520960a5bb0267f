"""CUDA_VISIBLE_DEVICES -> NVML devices, by CUDA's own rules (indices, UUIDs, abbreviations, MIG, stop at a bad one)."""

from __future__ import annotations

from gputriage.hardware.visible import NvmlIdentity, VisibleDevice, map_visible

GPUS = [
    NvmlIdentity(0, "GPU-aaaa1111-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB"),
    NvmlIdentity(1, "GPU-aaaa2222-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB"),
    NvmlIdentity(2, "GPU-bbbb3333-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB"),
]
MIG_GPUS = [
    NvmlIdentity(0, "GPU-cccc0000-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-80GB", ("MIG-11aa", "MIG-22bb")),
]


def nvml_indices(value: str | None, gpus: list[NvmlIdentity] = GPUS) -> list[int]:
    return [d.nvml_index for d in map_visible(value, gpus).devices]


def test_unset_shows_every_gpu_in_order() -> None:
    assert nvml_indices(None) == [0, 1, 2]


def test_empty_and_minus_one_hide_everything() -> None:
    assert nvml_indices("") == []
    vis = map_visible("-1", GPUS)
    assert vis.devices == []
    assert vis.ignored == ["-1 (hides every GPU)"]


def test_indices_renumber_from_zero() -> None:
    vis = map_visible("2,0", GPUS)
    assert vis.devices == [VisibleDevice(0, 2), VisibleDevice(1, 0)]
    assert vis.for_nvml(0) == VisibleDevice(1, 0)
    assert vis.for_nvml(1) is None


def test_parsing_stops_at_the_first_entry_that_names_no_gpu() -> None:
    vis = map_visible("1,7,0", GPUS)
    assert [d.nvml_index for d in vis.devices] == [1]
    assert vis.ignored == ["7 (no such GPU)", "0 (after an ignored entry)"]


def test_a_gpu_listed_twice_stops_parsing() -> None:
    assert nvml_indices("0,0,1") == [0]


def test_full_and_abbreviated_uuids() -> None:
    assert nvml_indices("GPU-bbbb3333-0000-0000-0000-000000000000") == [2]
    assert nvml_indices("GPU-aaaa2,GPU-b") == [1, 2]
    assert nvml_indices("bbbb") == [2]  # CUDA also accepts the UUID without its GPU- prefix


def test_an_ambiguous_prefix_names_nothing() -> None:
    vis = map_visible("GPU-aaaa", GPUS)
    assert vis.devices == []
    assert "GPU-aaaa" in vis.ignored[0]


def test_mig_instance_by_uuid() -> None:
    vis = map_visible("MIG-22bb", MIG_GPUS)
    assert vis.devices == [VisibleDevice(0, 0, "MIG-22bb")]


def test_mig_gpu_without_a_list_is_its_first_instance() -> None:
    assert map_visible(None, MIG_GPUS).devices == [VisibleDevice(0, 0, "MIG-11aa")]


def test_r450_mig_form_names_the_parent() -> None:
    vis = map_visible("MIG-GPU-cccc0000-0000-0000-0000-000000000000/1/0", MIG_GPUS)
    assert [d.nvml_index for d in vis.devices] == [0]


def test_mixed_models_warn_about_cuda_order() -> None:
    mixed = [NvmlIdentity(0, "GPU-1", "NVIDIA GeForce RTX 3090"), NvmlIdentity(1, "GPU-2", "NVIDIA A100-PCIE-40GB")]
    assert map_visible(None, mixed).note is not None
    assert map_visible(None, mixed, device_order="PCI_BUS_ID").note is None
    assert map_visible(None, GPUS).note is None
