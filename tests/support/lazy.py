"""A client library imported where a test first uses it, not where the test module is collected.

Every pytest-xdist worker collects every test module, so a library a module imports at its top is imported into each
worker, whether or not that worker runs one of the module's tests; the SDKs the end-to-end tests drive take seconds
of CPU to import (``anthropic`` alone about two). ``anthropic = lazy("anthropic")`` gives the module object at once
and runs the library's own import on the first attribute read, so only the worker that runs those tests pays for it.
"""

import importlib.util
import sys
from types import ModuleType


def lazy(name: str) -> ModuleType:
    """The module ``name``: the one imported already, else one whose body runs when an attribute is first read."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
