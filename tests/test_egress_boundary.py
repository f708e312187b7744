"""One choke point: only assistant/net/egress.py may reach the network.

Static half: no other module imports a network library.  The runtime half
(every connection made during a real `drag ask` happens inside egress.send)
lives in tests/test_integration.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import assistant

PACKAGE = Path(assistant.__file__).parent
NETWORK_MODULES = {
    "socket",
    "ssl",
    "http",
    "http.server",
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
# An import whose module name is computed at run time (importlib.import_module(name)).
DYNAMIC = "<a module named at run time>"
NETWORK_MODULES.add(DYNAMIC)
# localserver binds a socket to find a free loopback port for the child server; it never
# connects.  egress imports the HTTP library the openai client is built on by its name.
# serve/server.py listens (http.server) for this machine's clients; it never connects.
ALLOWED = {
    "net/egress.py": {"openai", DYNAMIC},
    "models/localserver.py": {"socket"},
    "serve/server.py": {"http.server"},
    # drag's own client of drag serve: loopback addresses only (test_serve.py); socket
    # for MSG_PEEK only, to see whether a client of drag serve closed its end.
    "net/loopback.py": {"http", "socket"},
}


def _top(name: str) -> str:
    """The library a module belongs to; urllib.parse (string functions) is not urllib's
    network half, and http.server (which listens, never connects) is told apart from
    http.client."""
    return name if name in ("urllib.parse", "http.server") else name.split(".")[0]


def _imports(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_top(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(_top(node.module))
        elif isinstance(node, ast.Call) and _called(node) in {"__import__", "import_module"}:
            first = node.args[0] if node.args else None
            # A name computed at run time could be any library: it counts as a network one.
            found.add(_top(str(first.value)) if isinstance(first, ast.Constant) else DYNAMIC)
    return found


def _called(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


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
    assert offenders == {}, f"network libraries outside assistant/net/egress.py: {offenders}"


@pytest.mark.parametrize("module", ["models/localserver.py", "serve/server.py"])
def test_a_listener_never_connects(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text("utf-8"))
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }
    assert not calls & {"connect", "connect_ex", "create_connection", "sendto", "sendall"}


def test_egress_has_one_sending_function() -> None:
    """Only _send calls the HTTP client, and only send() calls _send -- after the guard."""
    tree = ast.parse((PACKAGE / "net" / "egress.py").read_text("utf-8"))
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


def test_send_judges_the_body_before_anything_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guard that refuses: send() raises, and neither the client is made nor _send
    called (recorded by stand-ins for both: nothing here may reach a network)."""
    from assistant.base.errors import GuardBlocked
    from assistant.net import egress

    reached: list[str] = []
    monkeypatch.setattr(egress, "_client", lambda endpoint: reached.append("client"))
    monkeypatch.setattr(egress, "_send", lambda *args: reached.append("_send"))

    class Refuses:
        def check_body(self, body: bytes, request: object) -> None:
            raise GuardBlocked("refused by the test's guard")

        def check_headers(self, headers: dict[str, str], request: object) -> None:
            raise AssertionError("headers come after the body")

    request = egress.ChatRequest(
        purpose="evidence",
        model="m",
        messages=({"role": "user", "content": "What is tea?"},),
        max_tokens=8,
    )
    with pytest.raises(GuardBlocked, match="refused by the test"):
        egress.send(egress.Endpoint("http://127.0.0.1:9/v1"), request, Refuses())
    assert reached == []


def test_proxy_settings_in_the_environment_are_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one connection is to the teacher: an HTTP(S)_PROXY or ALL_PROXY in the
    environment would send the request, its key included, to another host (a listener
    stands for that proxy here and counts who connects)."""
    import json
    import socket
    import threading

    from assistant.net import egress
    from tests.fakes import fake_teacher_server

    proxy = socket.create_server(("127.0.0.1", 0))
    reached: list[int] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = proxy.accept()
            except OSError:
                return
            reached.append(1)
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    address = f"http://127.0.0.1:{proxy.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, address)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    asked: list[int] = []
    body = json.dumps({"object": "list", "data": []}).encode()
    try:
        with fake_teacher_server(body, on_request=lambda: asked.append(1)) as url:
            endpoint = egress.Endpoint(url, api_key="k", timeout=10, max_retries=0)
            egress.send(endpoint, egress.ModelsRequest(), egress.BodylessOnly())
    finally:
        proxy.close()
    assert (asked, reached) == ([1], [])


@pytest.mark.parametrize(
    "usage",
    [
        "x",
        {"prompt_tokens": "lots", "completion_tokens": 10**30},
        {"prompt_tokens": None, "completion_tokens": 2.5},
        {"prompt_tokens": True, "completion_tokens": -3},
    ],
)
def test_a_reply_with_nonsense_token_counts_is_read_with_counts_of_zero(usage: object) -> None:
    """The ledger keeps whole numbers: counts that are not one are 0, and the reply's
    text is not lost (a fake guard lets the request through: the reply is the subject)."""
    import json

    from assistant.net import egress
    from tests.fakes import FakeGuardPassingAll, fake_teacher_server

    body = {"choices": [{"message": {"content": "Paris."}, "finish_reason": "stop"}]}
    request = egress.ChatRequest(
        purpose="evidence", model="m", messages=({"role": "user", "content": "Hi?"},), max_tokens=8
    )
    with fake_teacher_server(json.dumps({**body, "usage": usage}).encode()) as url:
        endpoint = egress.Endpoint(url, timeout=10, max_retries=0)
        reply = egress.send(endpoint, request, FakeGuardPassingAll())
    assert (reply.text, reply.prompt_tokens, reply.completion_tokens) == ("Paris.", 0, 0)
    assert reply.model == "m"  # none named: the model asked for


def test_the_import_scan_sees_imports_made_at_run_time() -> None:
    tree = ast.parse(
        "import importlib\n"
        "def f(name):\n"
        "    import socket as s\n"
        "    importlib.import_module(name)\n"
        "    __import__('http.client')\n"
    )
    assert _imports(tree) >= {"socket", DYNAMIC, "http"}
