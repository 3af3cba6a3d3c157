"""Runtime dependencies are what runtime code imports: pyproject's `dependencies` against the imports
under wirelog/, so a wheel (and a Spark executor's environment) carries nothing the code never loads
and lacks nothing it does."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

from tests.conftest import REPO
from wirelog.cli.main import LIBRARIES

# Imported under wirelog/ but installed and pinned by a declared distribution: PySpark raises
# py4j's Java errors, and pins the py4j it speaks to.
BROUGHT_BY = {"py4j": "pyspark"}


def dist_name(requirement: str) -> str:
    """'moto[server]>=5.0' → 'moto'; PEP 503 normalised ('PyYAML' → 'pyyaml')."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def import_names(dist: str) -> set[str]:
    """The top-level modules a distribution installs (PyYAML → yaml), from the installed files; its
    own name, as most have, when it is not installed."""
    names = {mod for mod, dists in installed().items() if dist in dists}
    return names or {dist.replace("-", "_")}


@cache
def installed() -> dict[str, set[str]]:
    """Top-level module → the distributions installing it (reading every RECORD: once)."""
    return {mod: set(map(dist_name, dists)) for mod, dists in packages_distributions().items()}


def imports(package: Path) -> dict[str, str]:
    """Top-level module of every absolute import under `package` → where it is first imported."""
    found: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module]
            else:
                continue
            for module in modules:
                found.setdefault(
                    module.partition(".")[0], f"{path.relative_to(package.parent)}:{node.lineno}"
                )
    return found


def declared(project: dict) -> tuple[list[str], list[str]]:
    """(runtime dependencies, those of the extras users install); the test extra is neither."""
    extras = project.get("optional-dependencies", {})
    optional = [r for extra, reqs in extras.items() if extra != "test" for r in reqs]
    return [dist_name(r) for r in project["dependencies"]], [dist_name(r) for r in optional]


def problems(project: dict, package: Path) -> list[str]:
    """A runtime dependency nothing imports, or a third-party import nothing declares."""
    runtime, optional = declared(project)
    used = {
        module: where
        for module, where in imports(package).items()
        if module not in sys.stdlib_module_names and module != package.name
    }
    found = [
        f"{dist} is a runtime dependency but nothing under {package.name}/ imports it"
        for dist in runtime
        if not import_names(dist) & used.keys()
    ]
    provided = set().union(*map(import_names, runtime + optional))
    found += [
        f"{where} imports {module}, which no runtime dependency or extra declares"
        for module, where in used.items()
        if module not in provided and BROUGHT_BY.get(module) not in runtime + optional
    ]
    return found


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_runtime_dependencies_are_what_wirelog_imports():
    assert problems(pyproject(), REPO / "wirelog") == []


def test_an_unused_dependency_and_an_undeclared_import_are_both_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("import os\nimport click.testing\nfrom . import sub\n")
    (package / "sub" / "__init__.py").write_text("def f():\n    from yaml import safe_load\n")
    project = {
        "dependencies": ["click>=8.1", "scapy>=2.5"],
        "optional-dependencies": {"test": ["pyyaml>=6"]},  # the tests' packages are not the runtime's
    }
    assert problems(project, package) == [
        "scapy is a runtime dependency but nothing under pkg/ imports it",
        "pkg/sub/__init__.py:2 imports yaml, which no runtime dependency or extra declares",
    ]


def test_a_distribution_is_known_by_the_modules_it_installs(tmp_path):
    """cassandra-driver (the tests' CQL client) installs `cassandra`, not `cassandra_driver`."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from cassandra.cluster import Cluster\n")
    assert problems({"dependencies": ["cassandra-driver>=3.29"]}, package) == []


def test_version_lists_only_libraries_wirelog_declares():
    runtime, optional = declared(pyproject())
    assert {dist_name(name) for name in LIBRARIES} <= set(runtime + optional)


def test_wirelog_runs_without_the_test_libraries(tmp_path):
    """What only the tests use is not needed to run: with scapy, crcmod and cramjam unimportable (a
    None in sys.modules), --version, a conversion to Parquet and inspect work (dynamic imports too)."""
    out = tmp_path / "out.parquet"
    code = (
        "import sys\n"
        "sys.modules.update(dict.fromkeys(['scapy', 'crcmod', 'cramjam']))\n"
        "from wirelog.cli.main import main\n"
        "main(sys.argv[1:])\n"
    )
    example = str(REPO / "examples" / "lumberjack-pylogbeat.pcap")
    for args in (
        ["--version"],
        ["convert", example, "--to", "parquet", "-o", str(out)],
        ["inspect", example],
    ):
        run = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=REPO, capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
    assert out.stat().st_size > 0
