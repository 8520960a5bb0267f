"""Width-aware building blocks of the terminal views: tables that stack when they do not fit, packed fields, frames.

Each block decides its layout when rich renders it, from the width it is given (the console's, or a panel's inside)
and from the console's kind:
- a terminal with colours gets colours and boxes; a console without a colour system (not a TTY, CI, NO_COLOR,
  TERM=dumb: see `output.plain_output`) gets plain text, no box drawing;
- a table whose fixed cells do not fit next to each other, with at least PROSE_MIN_WIDTH for its sentences, is shown
  stacked: one block per row, its fields packed " · " between them. A number or a name is never cut or wrapped in
  the middle; only sentences wrap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import msgspec
from rich import box
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.rule import Rule
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from gputriage.report.sanitize import terminal_text

# A sentence column narrower than this reads as a word per line: the table is stacked instead.
PROSE_MIN_WIDTH = 20
SEPARATOR = " · "
INDENT = 2
_WORD = re.compile(r"\S+")


def is_plain(console: Console) -> bool:
    """Plain text: no colours and no boxes. `output.make_console` leaves the colour system out for pipes, CI,
    NO_COLOR and TERM=dumb; a console rich finds unable to show colours counts the same."""
    return console.color_system is None


def plain(value: object, style: str = "") -> Text:
    """Text from a record, as literal text: control characters escaped (sanitize.py), and never read as markup
    (a kernel named `foo[/]` would otherwise break the table)."""
    return Text(terminal_text(str(value)), style=style)


class Column(msgspec.Struct, frozen=True):
    header: str
    justify: str = "left"  # left | right
    prose: bool = False  # a sentence: may wrap in its cell; every other cell is shown whole, on one line
    key: bool = False  # names the row: in the stacked layout, the row's block starts with it
    label: bool = True  # in the stacked layout, the value follows its header ("busy 38%"); False: the value alone
    style: str = ""
    min_width: int = PROSE_MIN_WIDTH  # a sentence column narrower than this stacks the table


class Grid(msgspec.Struct):
    """A table's content, laid out when rendered: as a table when it fits the width, else stacked."""

    columns: Sequence[Column]
    rows: list[list[Cell]] = msgspec.field(default_factory=list)
    row_styles: list[str] = msgspec.field(default_factory=list)  # one per row, or empty
    title: Text | None = None
    show_header: bool = True
    ruled_header: bool = False  # in a terminal: a heavy rule under the header and lines between the columns

    def add_row(self, *cells: Cell | str, style: str = "") -> None:
        self.rows.append([plain(c) if isinstance(c, str) else c for c in cells])
        self.row_styles.append(style)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        ruled = self.ruled_header and not is_plain(console)
        if self.title is not None:
            yield self.title
        if not self.rows:
            return
        if table_width(self, ruled) <= options.max_width:
            yield self._table(ruled)
        else:
            yield from self._stacked(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        ruled = self.ruled_header and not is_plain(console)
        natural = sum(self._natural(i) for i in range(len(self.columns))) + _gap(ruled) * (len(self.columns) - 1)
        return Measurement(min(natural, options.max_width), min(natural, options.max_width))

    # -- the table ------------------------------------------------------------------------------------------------

    def _table(self, ruled: bool) -> Table:
        table = Table(
            box=box.HEAVY_HEAD if ruled else None,
            show_header=self.show_header,
            show_edge=False,
            pad_edge=False,
            header_style="bold" if ruled else "dim",
        )
        for index, column in enumerate(self.columns):
            natural = self._natural(index)
            table.add_column(
                column.header,
                justify=column.justify,  # type: ignore[arg-type]  # rich's JustifyMethod literal
                style=column.style,
                no_wrap=not column.prose,
                min_width=None if column.prose else natural,
                overflow="fold",
            )
        for row, style in zip(self.rows, self._styles(), strict=True):
            table.add_row(*row, style=style)
        return table

    # -- stacked: one block per row -------------------------------------------------------------------------------

    def _stacked(self, width: int) -> Iterable[RenderableType]:
        for row, style in zip(self.rows, self._styles(), strict=True):
            chunks = [self._chunk(c, cell) for c, cell in zip(self.columns, row, strict=True) if c.key and cell]
            chunks += [
                self._chunk(c, cell)
                for c, cell in zip(self.columns, row, strict=True)
                if not c.key and not c.prose and cell
            ]
            for line in pack(chunks, width):
                line.stylize(style)
                yield line
            for column, cell in zip(self.columns, row, strict=True):
                if column.prose and not column.key and cell:
                    sentence = cell if isinstance(cell, Packed) else self._chunk(column, cell, separator=": ")
                    if isinstance(sentence, Text):
                        sentence.stylize(style)
                    yield Padding(sentence, (0, 0, 0, INDENT), expand=False)

    def _chunk(self, column: Column, cell: Cell, separator: str = " ") -> Text:
        text = Text(cell.separator).join(cell.chunks) if isinstance(cell, Packed) else cell.copy()
        text.stylize(column.style)
        if column.label and column.header:
            return Text.assemble((column.header + separator, "dim"), text)
        return text

    # -- widths ---------------------------------------------------------------------------------------------------

    def _styles(self) -> list[str]:
        return self.row_styles if len(self.row_styles) == len(self.rows) else [""] * len(self.rows)

    def _natural(self, index: int) -> int:
        widths = [_natural_width(row[index]) for row in self.rows]
        if self.show_header:
            widths.append(len(self.columns[index].header))
        return max(widths, default=0)

    def minimum(self, index: int) -> int:
        """The narrowest a column may be: its whole cells, or for a sentence PROSE_MIN_WIDTH and its longest word."""
        natural = self._natural(index)
        if not self.columns[index].prose:
            return natural
        words = [w for row in self.rows for w in _word_widths(row[index])]
        if self.show_header:
            words.append(len(self.columns[index].header))
        return max(max(words, default=0), min(natural, self.columns[index].min_width))


def table_width(grid: Grid, ruled: bool = False) -> int:
    """The narrowest the grid can be as a table without cutting or wrapping anything but its sentences."""
    return sum(grid.minimum(i) for i in range(len(grid.columns))) + _gap(ruled) * (len(grid.columns) - 1)


def _gap(ruled: bool) -> int:
    # rich's padding (0, 1) between cells, plus the vertical line of a ruled table
    return 3 if ruled else 2


def _natural_width(cell: Cell) -> int:
    """The width of a cell on one line (its longest line, when it has several)."""
    if isinstance(cell, Packed):
        return cell.width
    return max((Text(line).cell_len for line in cell.plain.split("\n")), default=0)


def _word_widths(cell: Cell) -> list[int]:
    """What a wrapped cell cannot break: its words, or a packed cell's values."""
    if isinstance(cell, Packed):
        return [c.cell_len for c in cell.chunks]
    return [Text(word).cell_len for word in _WORD.findall(cell.plain)]


def pack(chunks: Sequence[Text], width: int, indent: int = INDENT, separator: str = SEPARATOR) -> list[Text]:
    """Chunks in lines of at most `width` cells, `separator` between them; continuation lines are indented. A chunk
    wider than a line gets a line of its own (and only then wraps)."""
    lines: list[Text] = []
    line = Text()
    for chunk in chunks:
        if line.plain.strip() and line.cell_len + len(separator) + chunk.cell_len > width:
            lines.append(line)
            line = Text(" " * indent)
        if line.plain.strip():
            line.append(separator, style="dim")
        line.append_text(chunk)
    if line.plain.strip():
        lines.append(line)
    return lines


class Packed:
    """Named values packed into lines at render time ("dataset X · batch_size 32 · num_workers 0"), for a table
    cell: a line breaks between two values, never inside one."""

    def __init__(self, chunks: Sequence[Text], indent: int = 0, separator: str = SEPARATOR) -> None:
        self.chunks = list(chunks)
        self.indent = indent
        self.separator = separator

    @property
    def width(self) -> int:
        """On one line."""
        return sum(c.cell_len for c in self.chunks) + len(self.separator) * max(0, len(self.chunks) - 1)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from pack(self.chunks, options.max_width, indent=self.indent, separator=self.separator)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((c.cell_len for c in self.chunks), default=0)
        return Measurement(min(widest, options.max_width), min(self.width, options.max_width))


Cell = Text | Packed


class Framed:
    """A titled block: a panel in a terminal, a title line over the body in plain text."""

    def __init__(self, title: Text, body: RenderableType) -> None:
        self.title = title
        self.body = body

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if is_plain(console):
            yield self.title
            yield Padding(self.body, (0, 0, 0, INDENT), expand=False)
        else:
            yield Panel(self.body, title=self.title, title_align="left", expand=True)


class Heading:
    """A section's first line: a rule with the title in a terminal, the title alone in plain text."""

    def __init__(self, title: Text) -> None:
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if is_plain(console):
            yield self.title
        else:
            yield Rule(self.title, align="left", style=self.title.style or "")


class OneLine:
    """A line that ends in "…" where the width ends, rather than wrapping (the short view's info findings)."""

    def __init__(self, text: Text) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        line = self.text.copy()
        line.truncate(options.max_width, overflow="ellipsis")
        yield line


class Trimmed:
    """A renderable without the spaces rich pads its lines and cells with at their ends: a log or a pipe gets no
    trailing whitespace, a terminal shows the same."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            yield from _rstrip(line)
            yield Segment.line()


def _rstrip(line: list[Segment]) -> list[Segment]:
    segments = list(line)
    while segments and not segments[-1].control and not segments[-1].text.rstrip(" "):
        segments.pop()
    if segments and not segments[-1].control:
        last = segments[-1]
        segments[-1] = Segment(last.text.rstrip(" "), last.style, last.control)
    return segments
