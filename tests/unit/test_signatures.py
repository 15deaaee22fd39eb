"""No function in ``proxy/`` takes more than six parameters (``self`` and ``cls`` not counted): state that travels
together belongs on one object (the exchange, a budget, a target), not in a longer argument list."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "proxy"
MOST = 6


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = function.args
    named = [*args.posonlyargs, *args.args, *args.kwonlyargs]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + (args.vararg is not None) + (args.kwarg is not None)


def too_long(source: str) -> list[str]:
    """The functions in ``source`` that take more than MOST parameters, by name."""
    return [node.name for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > MOST]


def test_no_function_in_proxy_takes_more_than_six_parameters() -> None:
    found = {str(path.relative_to(PACKAGE)): names for path in sorted(PACKAGE.rglob("*.py"))
             if (names := too_long(path.read_text()))}
    assert found == {}


def test_the_count_sees_every_kind_of_parameter() -> None:
    assert too_long("def f(a, /, b, *c, d, **e): pass\nclass K:\n    def m(self, a, b, c, d, e, f): pass") == []
    assert too_long("def f(a, /, b, *c, d, e, f, **g): pass") == ["f"]
    assert too_long("class K:\n    async def m(self, a, b, c, d, e, f, g): pass") == ["m"]
