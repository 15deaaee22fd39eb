"""A plain ``pip install toolmend`` (no extras) must run: every module the package imports is the standard
library's, the package's own, or provided by a core dependency in pyproject.toml. (CI also installs the
project without extras into a fresh venv and starts it: .ci/plain-install.)"""

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_modules() -> dict[str, str]:
    """Top-level module -> the first file importing it, over every module of the package."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "proxy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_third_party_import_is_a_core_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {normalized(re.split(r"[<>=!~;\[ ]", spec, 1)[0]) for spec in project["dependencies"]}
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module, where in imported_modules().items():
        if module == "proxy" or module in sys.stdlib_module_names:
            continue
        distributions = {normalized(name) for name in providers.get(module, [module])}
        if not distributions & core:
            missing[module] = where
    assert not missing, f"imported but not a core dependency (a plain pip install would crash): {missing}"
