"""The import graph: no cycle (TYPE_CHECKING and function-level imports included), the
layers point one way, and nothing but the entry points knows the daemon."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Lower layers never import higher ones: domain <- store <- services <- server <- daemon.
LAYERS: list[tuple[str, ...]] = [
    (
        "pokeralphd",
        "pokeralphd.domain",
        "pokeralphd.protocol",
        "pokeralphd.errors",
        "pokeralphd.ports",
        "pokeralphd.proc",
        "pokeralphd.sandbox",
        "pokeralphd.paths",
        "pokeralphd.settings",
        "pokeralphd.logsetup",
        "pokeralphd.demo",
    ),
    ("pokeralphd.store", "pokeralphd.validation"),
    (
        "pokeralphd.agents",
        "pokeralphd.battle",
        "pokeralphd.inbox",
        "pokeralphd.planning",
        "pokeralphd.permissions",
        "pokeralphd.localagent",
    ),
    ("pokeralphd.repository", "pokeralphd.repositories"),
    ("pokeralphd.server", "pokeralphd.web"),
    ("pokeralphd.daemon",),
    ("pokeralphd.cli", "pokeralphd.__main__", "pokeralphd.contract"),
]
ENTRY_POINTS = set(LAYERS[-1])


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for path in (ROOT / package).rglob("*.py"):
        if "demo/sample" in path.as_posix():
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


@functools.cache
def _package_imports(package: str) -> dict[str, frozenset[str]]:
    """The import graph of ``package``, parsed once per test process (three tests read it)."""
    return {name: frozenset(targets) for name, targets in _imports(_modules(package)).items()}


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            edges[name] |= {t for t in targets if t in modules and t != name}
    return edges


def _layer(module: str) -> int:
    best, rank = -1, 0
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert best >= 0, f"{module} belongs to no layer: add it to LAYERS"
    return rank


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    edges = _package_imports("pokeralphd")
    assert _cycles({name: set(targets) for name, targets in edges.items()}) == []


def test_layers_point_one_way() -> None:
    edges = _package_imports("pokeralphd")
    upward = [
        f"{source} -> {target}"
        for source, targets in sorted(edges.items())
        for target in sorted(targets)
        if _layer(target) > _layer(source)
    ]
    assert upward == []


def test_only_the_entry_points_know_the_daemon() -> None:
    edges = _package_imports("pokeralphd")
    knowing = {source for source, targets in edges.items() if "pokeralphd.daemon" in targets}
    assert knowing <= ENTRY_POINTS


def test_the_client_needs_nothing_of_the_daemon_package() -> None:
    for path in (ROOT / "pokeralphctl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("pokeralphd"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("pokeralphd") for a in node.names), path


# What the daemon loads only when first needed: GitPython (a sixth of its imports) when a
# repository is first asked something, the web stack when the dashboard starts, httpx
# with the local agent. A daemon that starts to answer a client pays for none of them.
LAZY = ("git", "starlette", "hypercorn", "httpx")


def test_importing_the_daemon_loads_nothing_it_loads_on_demand() -> None:
    probe = "import json, sys, pokeralphd.cli; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    loaded = {name.split(".")[0] for name in json.loads(out)}
    assert [name for name in LAZY if name in loaded] == []


def test_the_demo_agent_starts_with_the_standard_library_only() -> None:
    """It runs once per iteration of the README's demo: the agents package it lives in
    must not pull in the backends, pydantic or psutil."""
    probe = "import json, sys, pokeralphd.agents.demo_agent; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    ours = sorted(m for m in json.loads(out) if m.startswith("pokeralphd"))
    assert ours == ["pokeralphd", "pokeralphd.agents", "pokeralphd.agents.demo_agent"]
    assert {"pydantic", "psutil", "anyio", "msgspec"}.isdisjoint(json.loads(out))
