"""The embedded teacher: ``python -m llama_cpp.server`` on 127.0.0.1.

Used when ``teacher.endpoint = "local"``.  ``drag teacher serve`` keeps one
running and records it in the state directory; other commands reuse a running
one, or start their own for the length of the command and stop it after.
It binds to loopback only, so nothing off the machine can reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from assistant import egress, paths
from assistant.errors import TeacherError
from assistant.student import default_threads

HOST = "127.0.0.1"
ALIAS = "local-teacher"


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    port: int
    model_path: str

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def state_file() -> Path:
    return paths.state_dir() / "teacher.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _probe(base_url: str, timeout: float = 2.0) -> bool:
    try:
        egress.send(
            egress.Endpoint(base_url, timeout=timeout, max_retries=0),
            egress.ModelsRequest(),
            egress.BodylessOnly(),
        )
    except TeacherError:
        return False
    return True


def running(model_path: Path | None = None) -> ServerInfo | None:
    """The server ``drag teacher serve`` left running, if it is alive and serves that model."""
    try:
        data = json.loads(state_file().read_text("utf-8"))
        info = ServerInfo(int(data["pid"]), int(data["port"]), str(data["model_path"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(info.pid):
        return None
    if model_path is not None and Path(info.model_path) != model_path:
        return None
    return info if _probe(info.base_url) else None


def log_file() -> Path:
    return paths.private_dir(paths.state_dir()) / "teacher-server.log"


def _tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


class LocalServer:
    """A llama_cpp.server child process."""

    def __init__(
        self, model_path: Path, *, n_ctx: int = 8192, port: int = 0, threads: int = 0
    ) -> None:
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.threads = threads or default_threads()
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            ALIAS,
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
        ]

    def start(self, *, timeout: float = 180.0) -> None:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            raise TeacherError(
                "the embedded teacher needs llama-cpp-python's server extra: "
                "pip install 'drag-assistant[server]'"
            ) from None
        log = log_file()
        with paths.open_private(log) as out:
            self.process = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TeacherError(
                    f"the local teacher server exited (code {self.process.returncode}): "
                    f"{_tail(log)} (log: {log})"
                )
            if _probe(self.base_url, timeout=5.0):
                return
            time.sleep(0.25)
        self.stop()
        raise TeacherError(
            f"the local teacher server did not start within {timeout:g} s (log: {log})"
        )

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def record(self) -> None:
        """Let other drag commands find and reuse this server."""
        assert self.process is not None
        info = ServerInfo(self.process.pid, self.port, str(self.model_path))
        paths.write_private(state_file(), json.dumps(asdict(info)))

    def forget(self) -> None:
        with contextlib.suppress(OSError):
            state_file().unlink()


@contextlib.contextmanager
def serving(model_path: Path, *, n_ctx: int) -> Iterator[str]:
    """Base URL of a local teacher: a running ``drag teacher serve``, or one started for now."""
    existing = running(model_path)
    if existing is not None:
        yield existing.base_url
        return
    server = LocalServer(model_path, n_ctx=n_ctx)
    server.start()
    try:
        yield server.base_url
    finally:
        server.stop()
