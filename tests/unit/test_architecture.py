"""The import graph: no cycle (TYPE_CHECKING and function-level imports included), the
layers point one way, nothing but the entry points knows the daemon, and the packages
depend on the shared core, not on each other."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import source_nodes

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
        "pokeralphd.notify",
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
        for node in source_nodes(path):
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
        for node in source_nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("pokeralphd"), path
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("pokeralphd") for a in node.names), path


# Issue 22: four programs in one distribution. The daemon, its client, the local agent
# and the ACP adapter share the core (pokeralph_core); none of them imports another's
# package for what the core holds, and the core imports none of them.
PACKAGES = ("pokeralphd", "pokeralphctl", "pokeralph_agent", "pokeralph_acp", "pokeralph_core")
# The core's standard-library-only modules: all of it the client may import (it loads
# them on every start; tests/cli/test_imports.py checks what they load).
STDLIB_CORE = ("pokeralph_core", "pokeralph_core.paths", "pokeralph_core.weblink")
FORBIDDEN_IMPORTS: dict[str, tuple[str, ...]] = {
    "pokeralphd": ("pokeralphctl", "pokeralph_agent", "pokeralph_acp"),
    "pokeralph_agent": ("pokeralphd", "pokeralph_acp"),
    "pokeralph_core": ("pokeralphd", "pokeralph_agent", "pokeralphctl", "pokeralph_acp"),
    "pokeralphctl": ("pokeralphd", "pokeralph_agent", "pokeralph_acp"),
    "pokeralph_acp": ("pokeralphd", "pokeralph_agent"),
}


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _absolute_imports(source: str | Path, module: str, is_package: bool) -> set[str]:
    """Every module ``source`` (a text, or a file) names in an import, at any depth
    (functions and TYPE_CHECKING included): for ``from m import a``, both ``m`` and ``m.a``."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found: set[str] = set()
    nodes = source_nodes(source) if isinstance(source, Path) else ast.walk(ast.parse(source))
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found |= {name} | {f"{name}.{alias.name}" for alias in node.names}
    return found


def _violations(module: str, imports: set[str]) -> list[str]:
    """What ``module`` imports that the rules above forbid its package."""
    top = module.split(".")[0]
    bad = []
    for target in sorted(imports):
        if any(_within(target, other) for other in FORBIDDEN_IMPORTS.get(top, ())):
            bad.append(f"{module} -> {target}")
        elif top == "pokeralphctl" and _within(target, "pokeralph_core"):
            parent = target.rsplit(".", 1)[0]  # from pokeralph_core.paths import socket_path
            if target not in STDLIB_CORE and (
                parent == "pokeralph_core" or parent not in STDLIB_CORE
            ):
                bad.append(f"{module} -> {target}")
    return bad


def test_the_packages_depend_on_the_core_not_on_each_other() -> None:
    found = []
    for package in PACKAGES:
        for name, path in sorted(_modules(package).items()):
            imports = _absolute_imports(path, name, path.name == "__init__.py")
            found += _violations(name, imports)
    assert found == []


def test_the_package_rules_see_what_they_forbid() -> None:
    """The rules above, on imports the tree had before issue 22 split it (each one is
    found), and on what they allow."""
    before = [
        ("pokeralphd.paths", "from pokeralphctl.paths import socket_path"),
        ("pokeralphd.web.auth", "from pokeralphctl.weblink import LINK_TTL, link_mac"),
        ("pokeralphd.agents.local", "from pokeralph_agent import cli"),
        ("pokeralph_agent.session", "from pokeralphd.store import documents"),
        ("pokeralph_agent.tools", "def f():\n    from pokeralphd.proc import end_tree"),
        ("pokeralph_agent.cli", "from pokeralphd.errors import PokeralphError"),
        ("pokeralph_agent.cli", "def f():\n    from pokeralphd.store.config_layers import load"),
        ("pokeralph_core.userdirs", "from pokeralphctl.paths import socket_path"),
        ("pokeralph_core.errors", "from pokeralphd.protocol.codes import ErrorCode"),
        ("pokeralph_core.documents", "if TYPE_CHECKING:\n    import pokeralph_agent"),
        ("pokeralphctl.client", "from pokeralph_core.documents import load"),
        ("pokeralphctl.client", "from pokeralph_core import errors"),
        ("pokeralphctl.cli", "from pokeralphd.cli import main"),
    ]
    for module, source in before:
        assert _violations(module, _absolute_imports(source, module, False)), source
    allowed = [
        ("pokeralphctl.client", "from pokeralph_core.paths import socket_path"),
        ("pokeralphctl.cli", "from pokeralph_core import weblink"),
        ("pokeralphd.web.auth", "from pokeralph_core.weblink import LINK_TTL"),
        ("pokeralph_agent.cli", "from pokeralphctl.client import Connection"),
        ("pokeralph_agent.cli", "def f():\n    from pokeralph_core.config.layers import load"),
        ("pokeralph_acp.daemon", "from pokeralphctl.client import Connection"),
    ]
    for module, source in allowed:
        assert _violations(module, _absolute_imports(source, module, False)) == [], source


def test_the_client_loads_only_standard_library_core_modules() -> None:
    """What the client may import of the core imports the standard library only."""
    for module in STDLIB_CORE:
        path = _modules("pokeralph_core")[module]
        imports = _absolute_imports(path, module, path.name == "__init__.py")
        tops = {name.split(".")[0] for name in imports} - {"__future__"}
        assert tops <= set(sys.stdlib_module_names), (module, sorted(tops))


# What the daemon never loads to start answering: GitPython (nothing imports it: git runs
# through pokeralphd.gitcmd), the web stack (loaded when the dashboard starts), httpx
# (with the local agent or a webhook).
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


# What writes the files the daemon owns (the user's config layer, the repository's, the
# daemon's state): the local agent asks the daemon instead (issue 22).
DAEMON_WRITES = {
    "pokeralphd.store.config_writes": None,  # every name: it writes the config layers
    "pokeralphd.store.rules": None,  # every name: rules are the daemon's to write
    "pokeralphd.store.local_defaults": {"install_defaults"},
    "pokeralphd.store.repo_store": None,
}


def test_the_local_agent_writes_no_file_the_daemon_owns() -> None:
    found = []
    for path in (ROOT / "pokeralph_agent").rglob("*.py"):
        aliases: dict[str, str] = {}  # a name bound to one of those modules -> the module
        for node in source_nodes(path):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    if dotted in DAEMON_WRITES:
                        aliases[alias.asname or alias.name] = dotted
                    names = DAEMON_WRITES.get(node.module, set())
                    if node.module in DAEMON_WRITES and (names is None or alias.name in names):
                        found.append(f"{path.name}: from {node.module} import {alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in DAEMON_WRITES:
                        aliases[alias.asname or alias.name] = alias.name
        for node in source_nodes(path):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
            ):
                names = DAEMON_WRITES[aliases[node.value.id]]
                if names is None or node.attr in names:
                    found.append(f"{path.name}: {aliases[node.value.id]}.{node.attr}")
    assert found == []


# Issue 21: one place runs git for the daemon, with everything a repository could make it
# run switched off. A git command built anywhere else would bypass that.
GIT_RUNNER = "pokeralphd.gitcmd"
SPAWNERS = {"run", "Popen", "call", "check_call", "check_output", "run_process", "open_process"}
SPAWNERS |= {"system", "popen", "execv", "execvp", "execvpe", "spawnv", "spawnvp"}
SPAWNERS |= {"create_subprocess_exec", "create_subprocess_shell"}


def _names_git(node: ast.AST) -> bool:
    """``node`` is a command naming git: ``"git"``, ``"git ..."``, ``["git", ...]``,
    ``[git_executable(), ...]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "git" or node.value.startswith("git ")
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        return _names_git(node.elts[0])
    if isinstance(node, ast.Starred):
        return _names_git(node.value)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "git_executable"
    return False


def test_only_the_git_runner_runs_git() -> None:
    """No module but :mod:`pokeralphd.gitcmd` imports GitPython, starts a process whose
    command names git, or asks where git is."""
    found = []
    for name, path in sorted(_modules("pokeralphd").items()):
        if name == GIT_RUNNER:
            continue
        for node in source_nodes(path):
            if isinstance(node, ast.Import) and any(
                a.name == "git" or a.name.startswith("git.") for a in node.names
            ):
                found.append(f"{name}:{node.lineno} imports GitPython")
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "git" or node.module.startswith("git."):
                    found.append(f"{name}:{node.lineno} imports GitPython")
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in SPAWNERS and node.args and _names_git(node.args[0]):
                    found.append(f"{name}:{node.lineno} runs git itself")
                if called == "which" and node.args and _names_git(node.args[0]):
                    found.append(f"{name}:{node.lineno} looks for git")
    assert found == []


def test_the_git_runner_rule_sees_what_it_forbids() -> None:
    """The rule above, on the calls the daemon once made itself."""
    for source in (
        'anyio.run_process(["git", "init", "-q", str(root)])',
        "subprocess.Popen([git_executable(), *args], cwd=root)",
        'subprocess.run("git status", shell=True)',
        'os.system("git status")',
    ):
        call = ast.parse(source).body[0]
        assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
        assert _names_git(call.value.args[0]), source
