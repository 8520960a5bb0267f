"""The `gputriage watch` view: every GPU with a utilisation sparkline, its numbers, its processes and a verdict.

The view is a pure function of the `gpu` section (and the per-GPU verdicts), so `--once` prints the very frame the
live loop shows, and the tests render it to a fixed-width console.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TextIO

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gputriage.findings import Finding
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.report.fmt import size
from gputriage.report.sanitize import clean_tree
from gputriage.report.terminal import finding_panel

SPARK = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40  # samples shown in the sparkline; at 1 s refresh, the last 40 s
_VERDICT_STYLE = {"idle": "bold yellow", "throttled": "bold red", "lost": "bold red", "busy on paper": "bold yellow"}


def sparkline(values: list[float | None], width: int = SPARK_WIDTH) -> str:
    """0-100% values as block characters; a missing reading is a space."""
    out = []
    for v in values[-width:]:
        if v is None:
            out.append(" ")
        else:
            out.append(SPARK[min(len(SPARK) - 1, int(max(0.0, v) / 100.0 * len(SPARK)))])
    return "".join(out)


COMPACT_FROM_GPUS = 3  # from three GPUs on, one row per GPU: eight panels would not fit a terminal


def watch_view(
    section: GpuSection, verdicts: Mapping[int, str], title: str = "gputriage watch", compact: bool | None = None
) -> RenderableType:
    """The whole frame: one panel per GPU, or one table row per GPU on a multi-GPU node. `verdicts` holds each
    GPU's one-line state by index (diagnosis.gpu_device_verdicts)."""
    section, verdicts = clean_tree(section), clean_tree(dict(verdicts))  # GPU names, process command lines
    if not section.devices:
        return Text(f"{title}: no GPU to show ({section.unavailable_reason or 'none visible'})")
    source = "" if section.source == "nvml" else f" · {section.source}"
    header = Text(f"{title} · driver {section.driver_version or '?'}{source}", style="bold")
    if compact is None:
        compact = len(section.devices) >= COMPACT_FROM_GPUS
    if compact:
        return Group(header, gpu_table(section), process_table(section), *verdict_lines(section, verdicts))
    return Group(header, *[gpu_panel(track, verdicts.get(track.index, "")) for track in section.devices])


def gpu_table(section: GpuSection) -> Table:
    table = Table(box=None, pad_edge=False, header_style="dim")
    for name, justify in (("GPU", "right"), ("name", "left"), ("util", "right"), ("last 20 readings", "left")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for name in ("memory", "power", "SM clock", "temp", "throttle"):
        table.add_column(name, justify="right" if name != "throttle" else "left", no_wrap=True)
    for track in section.devices:
        now = track.samples[-1] if track.samples else GpuSample(t_s=0.0)
        if track.lost or track.error:
            table.add_row(
                str(track.index), track.name or "?", Text("lost" if track.lost else "error", style="bold red")
            )
            continue
        table.add_row(
            str(track.index),
            (track.name or "?").replace("NVIDIA ", ""),
            _pct(now.gpu_util_pct),
            sparkline(_util_series(track), width=20),
            f"{size(now.memory_used_bytes)} / {size(track.memory_total_bytes)}",
            f"{_num(now.power_w, 'W')} / {_num(track.power_limit_w, 'W')}",
            _num(now.sm_clock_mhz, "MHz"),
            _num(now.temperature_c, "C"),
            "n/a" if now.throttle_reasons is None else (", ".join(now.throttle_reasons) or "none"),
        )
    return table


def process_table(section: GpuSection) -> Table:
    table = Table(box=None, pad_edge=False, header_style="dim")
    for name in ("GPU", "pid", "memory", "SM"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("command", overflow="ellipsis", no_wrap=True)
    for track in section.devices:
        for proc in track.processes:
            role = f" [{proc.role}]" if proc.role else ""
            memory = size(proc.used_memory_bytes) if proc.used_memory_bytes is not None else "n/a"
            table.add_row(
                str(track.index), str(proc.pid), memory, _pct(proc.sm_util_pct), f"{proc.command or '?'}{role}"
            )
    return table


def verdict_lines(section: GpuSection, verdicts: Mapping[int, str]) -> list[Text]:
    lines = []
    for track in section.devices:
        verdict = verdicts.get(track.index, "")
        lines.append(Text(f"GPU {track.index} → {verdict}", style=_verdict_style(verdict)))
    return lines


def _verdict_style(verdict: str) -> str:
    return next((s for prefix, s in _VERDICT_STYLE.items() if verdict.startswith(prefix)), "bold green")


def _util_series(track: GpuTrack) -> list[float | None]:
    util: list[float | None] = [s.gpu_util_pct for s in track.samples]
    if len(track.util_recent_pct) > len(util):  # a fresh watch: the driver's last ~20 s say more than our ticks
        util = list(track.util_recent_pct)
    return util


def gpu_panel(track: GpuTrack, verdict: str) -> Panel:
    title = Text(f"GPU {track.index}" + (f" · {track.name}" if track.name else ""), style="bold")
    style = _verdict_style(verdict)
    if track.lost or track.error:
        return Panel(Text(verdict or f"unreadable: {track.error}", style="bold red"), title=title, title_align="left")
    parts: list[RenderableType] = [_metrics(track)]
    if track.processes:
        parts.append(_processes(track))
    parts.append(Text(f"→ {verdict}", style=style))
    return Panel(Group(*parts), title=title, title_align="left")


def _metrics(track: GpuTrack) -> Table:
    now = track.samples[-1] if track.samples else GpuSample(t_s=0.0)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_row("util", f"{_pct(now.gpu_util_pct)} {sparkline(_util_series(track))}")
    memory = f"{size(now.memory_used_bytes)} / {size(track.memory_total_bytes)}"
    if now.memory_used_bytes is not None and track.memory_total_bytes:
        memory += f" ({100 * now.memory_used_bytes / track.memory_total_bytes:.0f}%)"
    grid.add_row("memory", memory)
    grid.add_row("power", f"{_num(now.power_w, 'W')} / {_num(track.power_limit_w, 'W')}")
    grid.add_row(
        "clocks",
        f"SM {_num(now.sm_clock_mhz, 'MHz')} of {_num(track.max_sm_clock_mhz, 'MHz')}"
        f" · mem {_num(now.mem_clock_mhz, 'MHz')} · {_num(now.temperature_c, 'C')}",
    )
    throttle = "unavailable" if now.throttle_reasons is None else (", ".join(now.throttle_reasons) or "none")
    grid.add_row("throttle", throttle)
    if now.sm_active_pct is not None:
        grid.add_row(
            "SMs (GPM)",
            f"active {_pct(now.sm_active_pct)} · occupancy {_pct(now.sm_occupancy_pct)} · "
            f"tensor {_pct(now.tensor_active_pct)} · DRAM {_pct(now.dram_active_pct)}",
        )
    if track.unavailable:
        missing = ", ".join(sorted(k for k in track.unavailable if k != "gpm"))
        if missing:
            grid.add_row("unavailable", missing)
    return grid


def _processes(track: GpuTrack) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="dim")
    table.add_column("pid", justify="right")
    table.add_column("memory", justify="right")
    table.add_column("SM", justify="right")
    table.add_column("command", overflow="ellipsis", no_wrap=True)
    for proc in track.processes:
        role = f" [{proc.role}]" if proc.role else ""
        table.add_row(
            str(proc.pid),
            size(proc.used_memory_bytes) if proc.used_memory_bytes is not None else "n/a",
            _pct(proc.sm_util_pct),
            f"{proc.command or '?'}{role}",
        )
    return table


def print_frame(
    section: GpuSection,
    verdicts: Mapping[int, str],
    stream: TextIO,
    width: int | None = None,
    findings: list[Finding] | None = None,
) -> None:
    """One frame (`watch --once`), followed by the rung-5 findings it supports."""
    console = Console(file=stream, width=width, highlight=False)
    console.print(watch_view(section, verdicts))
    for finding in findings or []:
        console.print(finding_panel(finding))


Frame = tuple[GpuSection, Mapping[int, str]]  # the gpu section, and each GPU's verdict by index


def run_live(next_frame: Callable[[], Frame], wait: Callable[[], bool], stream: TextIO) -> None:
    """Redraw until `wait()` returns False (or Ctrl-C): `next_frame` takes a tick and returns the frame."""
    console = Console(file=stream, highlight=False)
    with Live(watch_view(*next_frame()), console=console, auto_refresh=False, screen=False) as live:
        while wait():
            live.update(watch_view(*next_frame()), refresh=True)


def _pct(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:4.0f}%"


def _num(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.0f} {unit}"
