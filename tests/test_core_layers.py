"""The core's layers point one way (docs/architecture.md, design.md's layout): each top-level module
of native/src uses only the layers below it, so no arrow runs up (records/ or tcp/ into decoders/)
and model/ is the one leaf. Checked over the `crate::` paths of the product code; test and fuzz
harnesses (tests.rs, fuzz.rs, `#[cfg(test)]` modules) may reach anything they exercise."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "native" / "src"
# From the top down; a module may use the modules of lower rank only.
RANK = {
    "python": 6,
    "fuzzing": 6,
    "pipeline": 5,
    "records": 4,
    "report": 4,
    "decoders": 4,
    "tcp": 3,
    "held": 3,
    "formats": 3,
    "capture": 2,
    "model": 1,
}
_TEST_MODULE = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod \w+\s*\{")


def _product_code(path: Path) -> str:
    """The file's text without its test module (by convention the file's last item)."""
    if path.name in ("tests.rs", "fuzz.rs"):
        return ""
    text = path.read_text()
    m = _TEST_MODULE.search(text)
    return text[: m.start()] if m else text


def _arrows() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.rs")):
        top = path.relative_to(SRC).parts[0].removesuffix(".rs")
        if top == "lib":
            continue
        for dep in set(re.findall(r"crate::(\w+)", _product_code(path))):
            if dep != top:
                found.setdefault((top, dep), []).append(str(path.relative_to(SRC)))
    return found


def test_every_top_level_module_has_a_layer():
    tops = {p.name.removesuffix(".rs") for p in SRC.iterdir() if p.name != "lib.rs"}
    assert tops <= set(RANK), tops - set(RANK)


def test_every_arrow_points_down():
    up = {arrow: files for arrow, files in _arrows().items() if RANK[arrow[1]] >= RANK[arrow[0]]}
    assert not up, "\n".join(f"{a} → {b}: {', '.join(files)}" for (a, b), files in sorted(up.items()))


def test_the_check_sees_arrows():
    """The check reads real `use` lines (a pattern that matched nothing would pass every tree)."""
    arrows = _arrows()
    assert ("pipeline", "decoders") in arrows and ("decoders", "model") in arrows
