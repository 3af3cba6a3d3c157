"""Hercules values as JSON-compatible documents.

Containers become dicts in tag order (a duplicate key keeps its last value, as the Java reader does;
the codec reports the duplicate), UUIDs canonical strings, vectors lists (a byte vector a list of ints),
invalid UTF-8 is shown with replacement characters (the codec reports the raw bytes), and non-finite
floats the strings "NaN", "Infinity", "-Infinity".

Events that wirelog itself exported (docs/hercules.md) carry a `wirelog` container; for them
`restore` undoes the export mapping: escaped tag names, wrapped arrays and big integers come back as
the original document.
"""

from __future__ import annotations

import math
from typing import Any

from wirelog.decoders.hercules.types import (
    BIGINT_TAG,
    BYTE,
    CONTAINER,
    DOUBLE,
    FLAG,
    FLOAT,
    INTEGER,
    ITEM_TAG,
    LONG,
    NULL,
    SHORT,
    STRING,
    UUID,
    VECTOR,
    Key,
    Type,
    Variant,
    Vector,
    unescape_name,
)

_NONFINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def _float(v: float | bytes) -> float | str:
    if isinstance(v, bytes) or v != v:
        return "NaN"
    return _NONFINITE.get(v, v)


def uuid_text(raw: bytes) -> str:
    """16 wire bytes (RFC 4122 order) as the canonical UUID string."""
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _text(v: str | bytes) -> str:
    return v if isinstance(v, str) else v.decode("utf-8", "replace")


def _scalar(t: Type, v: Any) -> Any:
    if t == STRING:
        return _text(v)
    if t in (FLOAT, DOUBLE):
        return _float(v)
    if t == FLAG:
        return bool(v)
    if t == UUID:
        return uuid_text(v)
    return v


class _Renderer:
    """One rendering policy: plain (`mapped` False) or undoing wirelog's export mapping."""

    __slots__ = ("mapped",)

    def __init__(self, mapped: bool) -> None:
        self.mapped = mapped

    def tags(self, tags: tuple[tuple[Key, Variant], ...]) -> Any:
        if self.mapped and len(tags) == 1 and tags[0][0] == BIGINT_TAG and tags[0][1].type == STRING:
            text = _text(tags[0][1].value)
            if text.isascii() and text.lstrip("-").isdigit():
                return int(text)
        name = unescape_name if self.mapped else str
        return {name(_text(k)): self.value(v.type, v.value) for k, v in tags}

    def value(self, t: Type, v: Any) -> Any:
        if t == CONTAINER:
            return self.tags(v)
        if t == VECTOR:
            return self.vector(v)
        return _scalar(t, v)

    def vector(self, vec: Vector) -> list[Any]:
        elem = vec.elem
        if elem == BYTE:
            return list(vec.items)
        if elem == CONTAINER:
            if self.mapped and vec.items and all(_is_item(c) for c in vec.items):
                return [self.value(c[0][1].type, c[0][1].value) for c in vec.items]
            return [self.tags(c) for c in vec.items]
        if elem == VECTOR:
            return [self.vector(x) for x in vec.items]
        if elem in (SHORT, INTEGER, LONG, NULL):
            return list(vec.items)
        return [_scalar(elem, x) for x in vec.items]


def _is_item(tags: tuple[tuple[Key, Variant], ...]) -> bool:
    return len(tags) == 1 and tags[0][0] == ITEM_TAG


_PLAIN = _Renderer(False)
_MAPPED = _Renderer(True)


def document(tags: tuple[tuple[Key, Variant], ...]) -> dict[str, Any]:
    """An event payload (or any container) as a JSON-compatible dict."""
    return _PLAIN.tags(tags)


def restore(v: Variant) -> Any:
    """A value written by wirelog's export mapping, as the document it came from."""
    return _MAPPED.value(v.type, v.value)


def exported_by_wirelog(tags: tuple[tuple[Key, Variant], ...]) -> Variant | None:
    """The `wirelog` container of an event wirelog exported, else None."""
    for key, var in tags:
        if key == "wirelog" and var.type == CONTAINER:
            inner = dict(var.value)
            kinds = (inner.get("protocol"), inner.get("kind"))
            if all(k is not None and k.type == STRING for k in kinds):
                return var
    return None
