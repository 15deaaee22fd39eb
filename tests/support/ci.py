"""What a test may be skipped for, and where. Outside CI a test whose package, tool or privilege is missing is
skipped, saying what it needs; under CI (``CI=true``, as CI services set it) the same test fails instead: ``.ci/run``
installs everything the tests need, and a skip there would hide a broken install."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def unavailable(reason: str) -> NoReturn:
    """Skip the test for ``reason``; under CI, fail it."""
    if under_ci():
        pytest.fail(f"CI cannot run this test: {reason}", pytrace=False)
    pytest.skip(reason)


def declared(module: str) -> ModuleType:
    """A module of a package the ``test`` extra declares (pyproject.toml), imported; ``unavailable`` when it is not."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        unavailable(f"{module} does not import ({exc}); it is in the test extra: pip install -e '.[test]'")


def require_immutable_files(folder: Path) -> None:
    """``chattr +i`` works in ``folder``: the chattr command (e2fsprogs), root, and a file system with the attribute."""
    if shutil.which("chattr") is None or os.geteuid() != 0:
        unavailable("needs chattr (bash .ci/run installs e2fsprogs) and root")
    probe = folder / "immutable-probe"
    probe.write_text("")
    if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
        unavailable(f"the file system of {folder} does not support the immutable attribute")
    subprocess.run(["chattr", "-i", str(probe)], check=True)
    probe.unlink()
