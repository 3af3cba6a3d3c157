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

A table of more than `BIG` rows (`streams` or `inspect --all` at 200,000 connections) is printed
in that plain form on a terminal too, by `print_rows`, laid out once: Rich measures every cell of
every layout it tries and renders each row as segments (~0.7 ms a row: 38 s for 50,000 streams,
and every row's objects at once), where a fixed-width line costs a few µs and the rows wait
only as one compact string each until the column widths are known.
"""

from __future__ import annotations

import operator
import textwrap
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from wirelog.cli.text import clean, literal

Cell = str | Text
BIG = 200  # rows past which a table is laid out once, in plain fixed-width form (print_rows)
_UNBOUNDED = 1 << 20  # a console width no table reaches: measures a table's natural width


@dataclass(frozen=True)
class Column:
    name: str
    justify: JustifyMethod = "left"
    drop: int = 0  # 0: essential; else the order in which it is left out when the table is too wide
    under: str | None = None  # essential: the column whose cells it may share, on a second line
    # print_rows leaves it out when its rows all hold the same value ("same": the capture, with one
    # input) or are all empty ("empty": a tls column when no stream is TLS)
    hide_if: str | None = None


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


_SEP = "\x00"  # between the cells of a waiting row: `clean` escapes NUL, so no cell holds one


def print_rows(
    console: Console,
    title: str | None,
    columns: Sequence[Column],
    rows: Iterable[Sequence[Cell]] | Iterable[tuple[Any, Sequence[Cell]]],
    wide: bool = False,
    keyed: bool = False,
    escaped: bool = False,
    hint: str = "--wide shows every column",
) -> int:
    """Print `rows` as plain aligned text in one pass over them, whatever their number: each row is
    kept as one string until the column widths are known; secondary columns are left out, in `drop`
    order, when the lines would be wider than the console (not with `wide`), and a line under the
    table names them. With `keyed`, `rows` are (sort key, cells), printed in key order; with
    `escaped`, the cells are `str` already escaped (`clean`). Returns the number of rows. No
    colour, no box; `under` is not used (the essential columns of a table this long are printed
    side by side, and the terminal wraps them if they do not fit)."""
    names = [c.name for c in columns]
    widths = [_width(n) for n in names]
    kept: list[Any] = []
    ascii_only = True
    check = [i for i, c in enumerate(columns) if c.hide_if]
    first: list[str] | None = None
    for row in rows:
        key, cells = row if keyed else (None, row)  # type: ignore[misc]
        texts = cells if escaped else [c.plain if isinstance(c, Text) else clean(c) for c in cells]
        joined = _SEP.join(texts)
        if joined.isascii():
            widths = list(map(max, widths, map(len, texts)))
        else:
            ascii_only = False
            widths = list(map(max, widths, map(_width, texts)))
        if check:
            if first is None:
                first = list(texts)
            check = [i for i in check if _alike(columns[i], texts[i], first[i])]
        kept.append((key, joined) if keyed else joined)
    if keyed:
        kept.sort(key=lambda kr: kr[0])
        kept = [r for _, r in kept]
    hidden = set(check) if first is not None else {i for i, c in enumerate(columns) if c.hide_if}
    shown = [i for i in range(len(columns)) if i not in hidden]
    left_out = _fit(console, columns, widths, shown, wide)
    if ascii_only:
        line = _ascii_line(columns, widths, shown)
    else:
        right = [columns[i].justify == "right" for i in range(len(columns))]

        def line(cells: Sequence[str]) -> str:
            parts = []
            for i in shown:
                t, pad = cells[i], widths[i] - _width(cells[i])
                parts.append(" " * pad + t if right[i] else t + " " * pad)
            return "  ".join(parts).rstrip() + "\n"

    out = console.file
    if title:
        out.write(title + "\n")
    out.write(line(names))
    for start in range(0, len(kept), 4096):  # a write per few thousand lines
        out.write("".join([line(r.split(_SEP)) for r in kept[start : start + 4096]]))
    _end(console, left_out, hint)
    return len(kept)


def print_known(
    console: Console,
    title: str | None,
    columns: Sequence[Column],
    widths: Sequence[int],
    rows: Iterator[tuple[str | int, ...]],
    wide: bool = False,
    hint: str = "--wide shows every column",
) -> int:
    """`print_rows` for rows whose column widths are known before the first row (`widths`), every
    cell an escaped text one terminal cell a character wide or an int >= 0: each row is printed as
    it comes, nothing is kept, and the rows are formatted by C code a few thousand at once (~1 µs a
    row: `inspect --all` at 200,000 connections). No column may have `hide_if`."""
    if any(c.hide_if for c in columns):
        raise ValueError("print_known does not hide columns")
    widths = [max(w, _width(c.name)) for w, c in zip(widths, columns, strict=True)]
    shown = list(range(len(columns)))
    left_out = _fit(console, columns, widths, shown, wide)
    line = _ascii_line(columns, widths, shown)
    fmt, pick = _format(columns, widths, shown), operator.itemgetter(*shown)
    out = console.file
    if title:
        out.write(title + "\n")
    out.write(line([c.name for c in columns]))
    n = 0
    while chunk := list(islice(rows, 4096)):  # a write per few thousand lines
        picked = chunk if len(shown) == len(columns) else map(pick, chunk)
        out.write("\n".join(map(str.rstrip, map(fmt.__mod__, picked))) + "\n")
        n += len(chunk)
    _end(console, left_out, hint)
    return n


def _fit(
    console: Console, columns: Sequence[Column], widths: Sequence[int], shown: list[int], wide: bool
) -> list[Column]:
    """Leave secondary columns out of `shown`, in `drop` order, until the lines fit the console (not
    with `wide`); returns the columns left out."""
    left_out: list[Column] = []
    if not wide:
        for column in sorted((c for c in columns if c.drop), key=lambda c: c.drop):
            if sum(widths[i] for i in shown) + 2 * (len(shown) - 1) <= console.width:
                break
            if columns.index(column) in shown:
                shown.remove(columns.index(column))
                left_out.append(column)
    return left_out


def _ascii_line(
    columns: Sequence[Column], widths: Sequence[int], shown: list[int]
) -> Callable[[Sequence[str]], str]:
    """A row's line from its cells, when every text is one cell a character: one %-format (twice as
    fast as str.format) of the shown cells, C-speed."""
    fmt = _format(columns, widths, shown)
    pick, one = operator.itemgetter(*shown), len(shown) == 1  # (one column: a value, not a tuple)

    def line(cells: Sequence[str]) -> str:
        values = pick(cells)
        return (fmt % ((values,) if one else values)).rstrip() + "\n"

    return line


def _format(columns: Sequence[Column], widths: Sequence[int], shown: list[int]) -> str:
    """The %-format of a line of the shown columns, each padded to its width."""
    return "  ".join(f"%{'' if columns[i].justify == 'right' else '-'}{widths[i]}s" for i in shown)


def _end(console: Console, left_out: list[Column], hint: str) -> None:
    """After a table's lines: the note naming the columns left out."""
    out = console.file
    if left_out:
        names_out = ", ".join(c.name for c in left_out)
        note = f"(not shown at {console.width} columns: {names_out}; {hint})"
        out.write(textwrap.fill(note, max(console.width, 20), break_on_hyphens=False) + "\n")
    out.flush()


def _alike(column: Column, value: str, first: str) -> bool:
    """Whether `column` may still be left out after a row holding `value`."""
    return not value if column.hide_if == "empty" else value == first


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)
