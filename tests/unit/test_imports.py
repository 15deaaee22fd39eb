"""No import circle anywhere in ``proxy/``: the module import graph, read with ``ast`` from every file, has no cycle.
Every import counts, at the top or inside a function, and under ``if TYPE_CHECKING:`` too: a circle of types is one of
the design, which only hides from the interpreter.

An edge goes from a module to the module it names (``from a.b import c``: to ``a.b.c`` when that is a module, else to
``a.b``) and to every package on the way there (``a``, ``a.b``: importing a submodule runs their ``__init__`` first),
but for the importer's own packages, which always ran before it.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "proxy"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _runs(target: str, importer: str) -> list[str]:
    """What importing ``target`` runs besides the importer's own packages: each package on its way, then itself."""
    parts = target.split(".")
    prefixes = [".".join(parts[:n]) for n in range(1, len(parts) + 1)]
    return [prefix for prefix in prefixes if prefix != importer and not importer.startswith(prefix + ".")]


def import_graph() -> dict[str, set[str]]:
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _absolute(node, name, path.name == "__init__.py")
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            graph[name].update(module for target in targets for module in _runs(target, name) if module in files)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    """``proxy/``'s import graph, read once for the tests that only look at it."""
    return import_graph()


def test_the_graph_sees_function_level_imports(graph: dict[str, set[str]]) -> None:
    assert "proxy.app" in graph["proxy.cli"]  # imported inside app_from_environment


def test_no_import_circle_in_proxy(graph: dict[str, set[str]]) -> None:
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(component) for component in found)


def test_a_circle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_dialect_package_imports_another(graph: dict[str, set[str]]) -> None:
    """Dialect packages sit side by side: what two of them share lives in ``proxy/dialects/`` or ``proxy/repair/``."""
    packages = {path.name for path in (PACKAGE / "dialects").iterdir() if (path / "__init__.py").exists()}
    found = []
    for module, targets in graph.items():
        parts = module.split(".")
        if parts[:2] == ["proxy", "dialects"] and len(parts) > 2 and parts[2] in packages:
            found += [f"{module} -> {target}" for target in targets
                      if target.split(".")[:2] == ["proxy", "dialects"] and len(target.split(".")) > 2
                      and target.split(".")[2] in packages - {parts[2]}]
    assert not found, "\n".join(found)
