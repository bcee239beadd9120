"""The import graph: no cycle (TYPE_CHECKING and function-level imports included), the
layers point one way, and nothing but the entry points knows the daemon."""

from __future__ import annotations

import ast
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
    assert _cycles(_imports(_modules("pokeralphd"))) == []


def test_layers_point_one_way() -> None:
    edges = _imports(_modules("pokeralphd"))
    upward = [
        f"{source} -> {target}"
        for source, targets in sorted(edges.items())
        for target in sorted(targets)
        if _layer(target) > _layer(source)
    ]
    assert upward == []


def test_only_the_entry_points_know_the_daemon() -> None:
    edges = _imports(_modules("pokeralphd"))
    knowing = {source for source, targets in edges.items() if "pokeralphd.daemon" in targets}
    assert knowing <= ENTRY_POINTS


def test_the_client_needs_nothing_of_the_daemon_package() -> None:
    for path in (ROOT / "pokeralphctl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("pokeralphd"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("pokeralphd") for a in node.names), path
