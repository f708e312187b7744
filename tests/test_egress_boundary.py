"""One choke point: only assistant/egress.py may reach the network.

Static half: no other module imports a network library.  The runtime half
(every connection made during a real `drag ask` happens inside egress.send)
lives in tests/test_integration.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import assistant

PACKAGE = Path(assistant.__file__).parent
NETWORK_MODULES = {
    "socket",
    "ssl",
    "http",
    "urllib",
    "urllib3",
    "httpx",
    "httpcore",
    "requests",
    "aiohttp",
    "websockets",
    "websocket",
    "openai",
    "ftplib",
    "smtplib",
    "telnetlib",
}
# localserver binds a socket to find a free loopback port for the child server; it never connects.
ALLOWED = {"egress.py": {"openai"}, "localserver.py": {"socket"}}


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.add(str(node.args[0].value).split(".")[0])
    return found


def test_only_egress_imports_network_libraries() -> None:
    offenders = {}
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 10
    for path in modules:
        rel = path.relative_to(PACKAGE).as_posix()
        used = _imports(ast.parse(path.read_text("utf-8"))) & NETWORK_MODULES
        extra = used - ALLOWED.get(rel, set())
        if extra:
            offenders[rel] = sorted(extra)
    assert offenders == {}, f"network libraries outside assistant/egress.py: {offenders}"


def test_localserver_never_connects() -> None:
    tree = ast.parse((PACKAGE / "localserver.py").read_text("utf-8"))
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & {"connect", "connect_ex", "create_connection", "sendto", "sendall"}


def test_egress_has_one_sending_function() -> None:
    """Only _send calls the HTTP client, and only send() calls _send -- after the guard."""
    tree = ast.parse((PACKAGE / "egress.py").read_text("utf-8"))
    functions = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    senders = {
        name
        for name, fn in functions.items()
        for node in ast.walk(fn)
        if isinstance(node, ast.Attribute) and node.attr in {"create", "list"}
    }
    assert senders == {"_send"}
    callers = {
        name
        for name, fn in functions.items()
        for node in ast.walk(fn)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_send"
    }
    assert callers == {"send"}
    body = ast.unparse(functions["send"])
    assert body.index("check_body") < body.index("_send(")  # judged before anything is sent
