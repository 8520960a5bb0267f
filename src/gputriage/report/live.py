"""The `gputriage watch` view: every GPU with a utilisation sparkline, its numbers, its processes and a verdict.

The view is a pure function of the `gpu` section (and the per-GPU verdicts), so `--once` prints the very frame the
live loop shows, and the tests render it to a fixed-width console. On a terminal the live loop redraws the frame;
in plain mode (a pipe, a CI log, NO_COLOR, TERM=dumb) it prints one line per interval instead, and however the watch
ends (Ctrl-C, SIGTERM, SIGHUP) it prints a summary of the whole session.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TextIO

import msgspec
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from gputriage.findings import Finding, Severity
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.record.numbers import gpu_util_mean_pct
from gputriage.report.fmt import duration, size
from gputriage.report.layout import Column, Framed, Grid, Packed, Trimmed, is_plain, plain
from gputriage.report.output import make_console
from gputriage.report.sanitize import clean_tree
from gputriage.report.terminal import finding_blocks, info_line, print_blocks
from gputriage.report.views import track_memory_peak_bytes
from gputriage.wording import counted

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


def gpu_table(section: GpuSection) -> Grid:
    """One row per GPU; stacked (one block per GPU) where the row does not fit the width."""
    grid = Grid(
        [
            Column("GPU", justify="right", key=True),
            Column("name", key=True, label=False),
            Column("util", justify="right"),
            Column("last 20 readings", label=False),
            Column("memory", justify="right"),
            Column("power", justify="right"),
            Column("SM clock", justify="right"),
            Column("temp", justify="right"),
            Column("throttle"),
        ]
    )
    for track in section.devices:
        now = track.samples[-1] if track.samples else GpuSample(t_s=0.0)
        name = plain((track.name or "?").replace("NVIDIA ", ""))
        if track.lost or track.error:
            state = Text("lost" if track.lost else "error", style="bold red")
            grid.add_row(str(track.index), name, state, "", "", "", "", "", "")
            continue
        grid.add_row(
            str(track.index),
            name,
            _pct(now.gpu_util_pct).strip(),
            sparkline(_util_series(track), width=20),
            f"{size(now.memory_used_bytes)} / {size(track.memory_total_bytes)}",
            f"{_num(now.power_w, 'W')} / {_num(track.power_limit_w, 'W')}",
            _num(now.sm_clock_mhz, "MHz"),
            _num(now.temperature_c, "C"),
            "n/a" if now.throttle_reasons is None else (", ".join(now.throttle_reasons) or "none"),
        )
    return grid


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


def gpu_panel(track: GpuTrack, verdict: str) -> RenderableType:
    title = Text(f"GPU {track.index}" + (f" · {track.name}" if track.name else ""), style="bold")
    style = _verdict_style(verdict)
    if track.lost or track.error:
        return Framed(title, Text(verdict or f"unreadable: {track.error}", style="bold red"))
    parts: list[RenderableType] = [_metrics(track)]
    if track.processes:
        parts.append(_processes(track))
    parts.append(Text(f"→ {verdict}", style=style))
    return Framed(title, Group(*parts))


def _metrics(track: GpuTrack) -> Table:
    now = track.samples[-1] if track.samples else GpuSample(t_s=0.0)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    # the last reading, said so: the verdict below rests on the mean of a window ("busy: 99% util" beside "100%")
    reading = Text(f"{_pct(now.gpu_util_pct)} now")
    grid.add_row("util", Packed([reading, Text(sparkline(_util_series(track)))], separator=" "))
    memory = f"{size(now.memory_used_bytes)} / {size(track.memory_total_bytes)}"
    if now.memory_used_bytes is not None and track.memory_total_bytes:
        memory += f" ({100 * now.memory_used_bytes / track.memory_total_bytes:.0f}%)"
    grid.add_row("memory", memory)
    grid.add_row("power", f"{_num(now.power_w, 'W')} / {_num(track.power_limit_w, 'W')}")
    clocks = [
        f"SM {_num(now.sm_clock_mhz, 'MHz')} of {_num(track.max_sm_clock_mhz, 'MHz')}",
        f"mem {_num(now.mem_clock_mhz, 'MHz')}",
        _num(now.temperature_c, "C"),
    ]
    grid.add_row("clocks", Packed([Text(c) for c in clocks]))
    throttle = "unavailable" if now.throttle_reasons is None else (", ".join(now.throttle_reasons) or "none")
    grid.add_row("throttle", throttle)
    if now.sm_active_pct is not None:
        gpm = [
            f"active {_pct(now.sm_active_pct).strip()}",
            f"occupancy {_pct(now.sm_occupancy_pct).strip()}",
            f"tensor {_pct(now.tensor_active_pct).strip()}",
            f"DRAM {_pct(now.dram_active_pct).strip()}",
        ]
        grid.add_row("SMs (GPM)", Packed([Text(g) for g in gpm]))
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
    *,
    findings: list[Finding] | None = None,
    verbose: bool = False,
) -> None:
    """One frame (`watch --once`), followed by the rung-5 findings it supports: the critical and warning ones in full,
    the info ones in one line each (all in full with `verbose`)."""
    console = make_console(stream, width)
    console.print(Trimmed(watch_view(section, verdicts)))
    infos = [f for f in findings or [] if f.severity is Severity.INFO and not verbose]
    for finding in findings or []:
        if finding not in infos:
            print_blocks(console, finding_blocks(finding))
    if infos:
        console.print()
    for finding in infos:
        console.print(info_line(finding))


Frame = tuple[GpuSection, Mapping[int, str]]  # the gpu section, and each GPU's verdict by index


class Stopped(Exception):
    """A signal ended the watch (raised by the command's handler): the summary names it."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


class LiveEnd(msgspec.Struct):
    last: Frame | None  # the last frame shown
    stopped_by: str | None  # "SIGINT", "SIGTERM", ...; None when `wait` ended the loop


def run_live(
    next_frame: Callable[[], Frame],
    wait: Callable[[], bool],
    stream: TextIO,
    clock: Callable[[], str] | None = None,
) -> LiveEnd:
    """Show frames until `wait()` returns False or a signal stops it (Ctrl-C, or `Stopped` from a handler).

    On a terminal the frame is redrawn in place; in plain mode each frame is one line (`watch_line`), with `clock()`
    at its start (default: the wall clock), so a log gets one line per interval as it happens.
    """
    console = make_console(stream)
    end = LiveEnd(None, None)
    try:
        if is_plain(console):
            stamp = clock or _wall_clock
            while True:
                end.last = next_frame()
                console.print(watch_line(*end.last, clock=stamp()), soft_wrap=True)
                stream.flush()
                if not wait():
                    break
        else:
            end.last = next_frame()
            with Live(watch_view(*end.last), console=console, auto_refresh=False, screen=False) as live:
                while wait():
                    end.last = next_frame()
                    live.update(watch_view(*end.last), refresh=True)
    except KeyboardInterrupt:
        end.stopped_by = "SIGINT"
    except Stopped as stop:
        end.stopped_by = stop.signal_name
    return end


def watch_line(section: GpuSection, verdicts: Mapping[int, str], clock: str = "") -> Text:
    """One interval in one line: each GPU's utilisation, memory, power and verdict."""
    section, verdicts = clean_tree(section), clean_tree(dict(verdicts))  # GPU names, NVML's reasons
    if not section.devices:
        return Text(f"{clock} no GPU to show ({section.unavailable_reason or 'none visible'})".strip())
    parts = []
    for track in section.devices:
        now = track.samples[-1] if track.samples else GpuSample(t_s=0.0)
        if track.lost or track.error:
            parts.append(f"GPU {track.index} → {verdicts.get(track.index) or 'lost'}")
            continue
        parts.append(
            f"GPU {track.index} util {_pct(now.gpu_util_pct).strip()} mem {size(now.memory_used_bytes)}"
            f" / {size(track.memory_total_bytes)} power {_num(now.power_w, 'W')}"
            f" → {verdicts.get(track.index, '')}"
        )
    return plain(" | ".join(parts) if not clock else f"{clock}  " + " | ".join(parts))


def summary_lines(
    section: GpuSection, verdicts: Mapping[int, str], elapsed_s: float, stopped_by: str | None
) -> list[Text]:
    """The end of a watch: how long it ran and how it ended, then each GPU over the whole session."""
    section, verdicts = clean_tree(section), clean_tree(dict(verdicts))
    how = f", stopped by {stopped_by}" if stopped_by else ""
    ticks = max((t.summary.sample_count for t in section.devices), default=0)
    lines = [Text(f"gputriage watch: {duration(elapsed_s)}, {counted(ticks, 'reading')}{how}", style="bold")]
    for track in section.devices:
        util = gpu_util_mean_pct(track)
        peak = track_memory_peak_bytes(track)
        facts = [
            f"mean util {_pct(util).strip()}" if util is not None else "util n/a",
            f"memory peak {size(peak)} of {size(track.memory_total_bytes)}" if peak is not None else "memory n/a",
        ]
        name = f" {track.name}" if track.name else ""
        verdict = verdicts.get(track.index, "")
        line = plain(f"GPU {track.index}{name}: {', '.join(facts)} → {verdict}")
        line.stylize(_verdict_style(verdict), line.plain.index("→"))
        lines.append(line)
    return lines


def print_summary(
    section: GpuSection, verdicts: Mapping[int, str], stream: TextIO, elapsed_s: float, stopped_by: str | None
) -> None:
    console = make_console(stream)
    for line in summary_lines(section, verdicts, elapsed_s, stopped_by):
        console.print(line, soft_wrap=is_plain(console))  # a log keeps one line per GPU; a terminal wraps words
    stream.flush()


def _wall_clock() -> str:
    return time.strftime("%H:%M:%S")


def _pct(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:4.0f}%"


def _num(value: float | None, unit: str) -> str:
    return "n/a" if value is None else f"{value:.0f} {unit}"
