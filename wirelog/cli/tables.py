"""Tables that fit the terminal without cutting the values a user came for.

Rich fits a table that is too wide by shrinking every column and cutting values with "…": on a
laptop terminal `inspect` showed `lum…` and `127.…` for the protocol and the endpoints. Here a table
too wide for the console leaves out its secondary columns instead, least useful first, and a note
under it names them. If its essential columns still do not fit side by side, a column marked
`under` another goes on a second line of that column's cells (the server under the client); a value
too long even then folds onto another line. Nothing essential is ever cut. `--wide` keeps every
column and lets the terminal wrap the lines.

Cells given as `str` are text from the capture or the wire: they are shown as they are, escaped
(cli/text.py), never read as Rich markup. On a plain console (not a terminal, or `--plain`) a
table is aligned text: no box drawing, two spaces between columns, none at the end of a line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from wirelog.cli.text import literal

Cell = str | Text
_UNBOUNDED = 1 << 20  # a console width no table reaches: measures a table's natural width


@dataclass(frozen=True)
class Column:
    name: str
    justify: JustifyMethod = "left"
    drop: int = 0  # 0: essential; else the order in which it is left out when the table is too wide
    under: str | None = None  # essential: the column whose cells it may share, on a second line


@dataclass(frozen=True)
class _Layout:
    stacked: bool  # `under` columns on the second line of their column's cells
    left_out: tuple[Column, ...]


def print_fitted(
    console: Console,
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Cell]],
    wide: bool = False,
) -> None:
    """Print the table in the first layout that fits `console.width` (every column when `wide`)."""
    widest = [max((row[i] for row in rows), key=_cells, default="") for i in range(len(columns))]
    for layout in _layouts(columns):
        natural = _natural_width(console, _table(console, title, columns, [widest], layout))
        if wide or natural <= console.width:
            break
    width = console.width
    if wide:  # lines longer than the terminal: it wraps them, nothing is left out
        console.width = max(width, natural)
    try:
        console.print(_table(console, title, columns, rows, layout))
    finally:
        console.width = width
    if layout.left_out:
        names = ", ".join(c.name for c in layout.left_out)
        console.print(
            Text(f"(not shown at {width} columns: {names}; --wide shows every column)", style="dim")
        )


def _layouts(columns: Sequence[Column]) -> Iterator[_Layout]:
    """From most to least complete: side by side with fewer and fewer secondary columns, then stacked."""
    secondary = tuple(sorted((c for c in columns if c.drop), key=lambda c: c.drop))
    for stacked in (False, True) if any(c.under for c in columns) else (False,):
        for n in range(len(secondary) + 1):
            yield _Layout(stacked, secondary[:n])


def new_table(console: Console, title: str | None = None, **kw: object) -> Table:
    """A table in the console's form: boxed on a terminal, plain aligned text otherwise."""
    if getattr(console, "plain", False):
        kw = {"box": None, "pad_edge": False, "padding": (0, 2, 0, 0), **kw}
    return Table(title=title, title_justify="left", header_style="bold", **kw)  # type: ignore[arg-type]


def cell(value: Cell) -> Text:
    """A cell as Text: a `str` is shown literally (escaped), never as markup."""
    return value if isinstance(value, Text) else literal(value)


def _table(
    console: Console, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], layout: _Layout
) -> Table:
    table = new_table(console, title)
    shown: list[tuple[int, int | None]] = []  # (column, column on its second line)
    for i, column in enumerate(columns):
        if column in layout.left_out or (layout.stacked and column.under):
            continue
        below = next((j for j, c in enumerate(columns) if layout.stacked and c.under == column.name), None)
        header = column.name if below is None else f"{column.name}\n{columns[below].name}"
        # fold, never "…", for essential values: reached only when nothing fits
        table.add_column(header, justify=column.justify, overflow="fold" if not column.drop else "ellipsis")
        shown.append((i, below))
    for row in rows:
        table.add_row(
            *(
                cell(row[i]) if j is None else Text.assemble(cell(row[i]), "\n", cell(row[j]))
                for i, j in shown
            )
        )
    return table


def _cells(value: Cell) -> int:
    return value.cell_len if isinstance(value, Text) else cell_len(literal(value).plain)


def _natural_width(console: Console, table: Table) -> int:
    return Measurement.get(console, console.options.update_width(_UNBOUNDED), table).maximum
