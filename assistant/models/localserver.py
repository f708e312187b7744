"""The embedded teacher: ``python -m llama_cpp.server`` on 127.0.0.1.

Used when ``teacher.endpoint = "local"``.  ``drag teacher serve`` keeps one
running and records it in the state directory, and other commands use it.
Without one, the first command that needs a teacher starts a *shared* server: a
keeper process (``python -m assistant.models.localserver``) runs it apart from that
command and records it, and every drag process that uses it holds a lease (a
shared ``flock``) until it exits.  So two terminals, or the app and a script,
use one server rather than two that fight for the same cores.  The keeper stops
the server ``teacher.keep_alive`` seconds after the last lease is let go, or at
once when it is 0.  Where there is no ``flock`` (Windows), each command starts
its own server and stops it after.  The server binds to loopback only, so
nothing off the machine can reach it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from assistant.base import paths, signals
from assistant.base.errors import DragError, TeacherError, TeacherTimeout
from assistant.models import llamabuild, llamacheck
from assistant.models.student import default_threads
from assistant.net import egress
from assistant.net.listeners import alive, cpu_ticks, gone_or_zombie, owns

HOST = "127.0.0.1"
ALIAS = "local-teacher"
POLL_SECONDS = 0.5  # how often a keeper looks for leases


@dataclass(frozen=True)
class ServerInfo:
    """A local teacher server: its process, port, model, and the key it asks of every
    request (kept in a record only its user can read; never on a command line)."""

    pid: int
    port: int
    model_path: str
    api_key: str = field(default="", repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"


def new_key() -> str:
    """A server's own API key: without it another local user's process gets a 401."""
    return secrets.token_urlsafe(32)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def state_file() -> Path:
    return paths.state_dir() / "teacher.json"


def _probe(base_url: str, api_key: str, timeout: float = 2.0, *, busy: int | None = None) -> bool:
    """The server answers, and takes ``api_key`` (a server that refuses it is not ours).
    ``busy``: the pid of a server known to be ours, up if it works (its CPU time grows)
    but does not answer in time: even its models' list waits for the reply it writes."""
    before = cpu_ticks(busy) if busy is not None else None
    try:
        egress.send(
            egress.Endpoint(base_url, api_key=api_key, timeout=timeout, max_retries=0),
            egress.ModelsRequest(),
            egress.BodylessOnly(),
        )
    except TeacherTimeout:  # stopped (Ctrl+Z) or stuck: not up
        return busy is not None and before is not None and (cpu_ticks(busy) or 0) > before
    except TeacherError:
        return False
    return True


def _recorded(path: Path, model_path: Path | None) -> ServerInfo | None:
    """The server recorded in ``path``, if it is alive, answers, and serves that model."""
    try:
        data = json.loads(path.read_text("utf-8"))
        key = data["api_key"]
        info = ServerInfo(int(data["pid"]), int(data["port"]), str(data["model_path"]), key)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(key, str) or not key:
        return None  # a record without a key is a server that lets anyone in: not used
    if not alive(info.pid) or (model_path is not None and Path(info.model_path) != model_path):
        return None
    if not owns(info.pid, info.port):
        return None  # the port is someone else's now: never send them a question
    return info if _probe(info.base_url, info.api_key, busy=info.pid) else None


def running(model_path: Path | None = None) -> ServerInfo | None:
    """The server ``drag teacher serve`` left running, if it is alive and serves that model."""
    return _recorded(state_file(), model_path)


def _key(model_path: Path, n_ctx: int) -> str:
    return hashlib.sha256(f"{model_path.resolve()}|{n_ctx}".encode()).hexdigest()[:12]


def shared_files(model_path: Path, n_ctx: int) -> tuple[Path, Path, Path]:
    """The record, the lease file and the log of the shared server for this model and
    context (another model or context gets a server of its own)."""
    folder = paths.private_dir(paths.state_dir())
    key = _key(model_path, n_ctx)
    record, lease, log = (folder / f"teacher-{key}{end}" for end in (".json", ".lease", ".log"))
    return record, lease, log


def _fcntl() -> Any:
    try:
        import fcntl
    except ImportError:  # Windows: no shared server
        return None
    return fcntl


@contextlib.contextmanager
def _deciding() -> Iterator[None]:
    """One drag process at a time starts, picks up or stops a shared server."""
    fcntl = _fcntl()
    with paths.open_private(paths.private_dir(paths.state_dir()) / "teacher.lock") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _take_lease(lease: Path) -> IO[bytes]:
    """A shared lock on ``lease``, held while the returned file is open."""
    fh = paths.open_private(lease)
    _fcntl().flock(fh.fileno(), _fcntl().LOCK_SH)
    return fh


def _leased(lease: Path) -> bool:
    """Whether a drag process holds a lease on ``lease`` (asked by trying the lock
    exclusively and letting it go at once)."""
    fcntl = _fcntl()
    with paths.open_private(lease) as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        return False


def log_file() -> Path:
    return paths.private_dir(paths.state_dir()) / "teacher-server.log"


def _tail(path: Path, lines: int = 3, limit: int = 0) -> str:
    """The log's last ``lines`` lines, or the exception's line of a traceback it ends in."""
    try:
        text = path.read_text("utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    if "Traceback (most recent call last):" in text and text[-2:-1] and text[-2][:1].isspace():
        said = text[-1]  # after the frames, which are indented: "ValueError: …"
        return said[: limit - 1] + "…" if limit and len(said) > limit else said
    tail = " | ".join(text[-lines:])
    return "…" + tail[-limit:] if limit and len(tail) > limit else tail


def exit_file(record: Path) -> Path:
    """Where the keeper (or ``drag teacher serve``) writes how a server it ran ended."""
    return record.with_name(record.stem + ".exit.json")


def crash_line(code: int, log: Path, note: str = "") -> str:
    """What a user is told when the server ended on its own: how, ``note``, then where
    its log is and the log's last words (cut first when the line is too long)."""
    how = llamacheck.describe_exit(code)
    tail = " ".join(_tail(log, 2, limit=60).split())
    return (
        f"the local teacher {'crashed' if code else 'stopped'}: its llama.cpp server "
        f"{'was ' if code < 0 else ''}{how}{note} (log: {log}; last lines: {tail})"
    )


# Base URL -> (server pid, its exit file) of the servers this process uses.
_served: dict[str, tuple[int, Path]] = {}


def crash_report(base_url: str, note: str = "", wait: float = 5.0) -> str | None:
    """Why the local server at ``base_url`` stopped answering, when it has died: its crash
    line, or None while it runs (the failure was something else).  A process that died
    closes its sockets before it is a zombie, so one that still looks alive is given a
    second to end; then its keeper writes the exit within half a second."""
    entry = _served.get(base_url)
    if entry is None:
        return None
    pid, exit_path = entry
    started = time.monotonic()
    while True:
        try:
            data = json.loads(exit_path.read_text("utf-8"))
            if int(data["pid"]) == pid:
                return crash_line(int(data["code"]), Path(data["log"]), note)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        waited = time.monotonic() - started
        if not gone_or_zombie(pid) and waited > 1.0:
            return None
        if waited > wait:
            return f"the local teacher's llama.cpp server (pid {pid}) has stopped{note}"
        time.sleep(0.1)


def server_env() -> dict[str, str]:
    """The environment of a server process: the user's, without what llama_cpp.server
    reads from it besides its command line (uvicorn's HOST and PORT, CONFIG_FILE, and
    every one of its settings, any case: a PORT or API_KEY in the user's shell would
    change where it listens or who may use it)."""
    from llama_cpp.server.settings import Settings

    drop = {name.casefold() for name in Settings.model_fields} | {"host", "port", "config_file"}
    return {k: v for k, v in os.environ.items() if k.casefold() not in drop}


class LocalServer:
    """A llama_cpp.server child process."""

    def __init__(
        self,
        model_path: Path,
        *,
        n_ctx: int = 8192,
        port: int = 0,
        threads: int = 0,
        log: Path | None = None,
        api_key: str | None = None,
    ) -> None:
        self.model_path = model_path
        self.api_key = api_key or new_key()
        self.n_ctx = n_ctx
        self.threads = threads or default_threads()
        self.port = port or free_port()
        self.log = log or log_file()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def command(self, cpu: Path | None = None) -> list[str]:
        """``llama_cpp.server`` run with the CPU variant ``cpu`` of a portable build."""
        return [
            *llamabuild.run_command(cpu),
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
            # A request waits for the reply being written (the default cuts a stream short).
            "--interrupt_requests",
            "false",
        ]

    def start(self, *, timeout: float = 180.0, die_with_parent: bool = False) -> None:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            raise TeacherError(
                "the embedded teacher needs llama-cpp-python's server extra: "
                "pip install 'drag-assistant[server]'"
            ) from None
        log = self.log
        # The same check as the student's, in a process of its own: a build that dies on
        # this CPU is an error that says so, not a server that dies on its first request.
        cpu = llamacheck.ready(self.model_path).variant
        try:  # failed, or interrupted (Ctrl+C) once the child is made: it ends
            with paths.open_private(log) as out:
                self.process = subprocess.Popen(
                    self.command(cpu),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    preexec_fn=_death_signal() if die_with_parent else None,
                    # The key goes in the environment, which only this user can read
                    # (/proc/PID/environ), never on the command line, which every user can.
                    env={**server_env(), "API_KEY": self.api_key},
                )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    how = llamacheck.describe_exit(self.process.returncode)
                    raise TeacherError(
                        f"the local teacher server exited ({how}; log: {log}): {_tail(log)}"
                    )
                # Answering is not enough: the listener must be this server (a process
                # that took the port first would answer and read the questions).
                if owns(self.process.pid, self.port) and _probe(
                    self.base_url, self.api_key, timeout=5.0
                ):
                    if _probe(self.base_url, "", timeout=5.0):  # a request let in without
                        raise TeacherError(
                            "the local teacher server does not ask for its API key (a "
                            "llama-cpp-python that ignores API_KEY?); stopped, nothing sent"
                        )
                    return
                time.sleep(0.25)
            raise TeacherError(
                f"the local teacher server did not start within {timeout:g} s (log: {log})"
            )
        except BaseException:
            self.stop(lambda: True)
            raise

    def ended(self) -> int | None:
        """The exit code of a server that ended by itself (negative: the signal), or None."""
        return None if self.process is None else self.process.poll()

    def write_exit(self, path: Path) -> Path:
        """Record how the server ended, for the drag processes that were using it; its log
        is kept apart, where the next server's does not write over it.  Returns that."""
        assert self.process is not None
        kept = self.log.with_suffix(".crash.log")
        with contextlib.suppress(OSError):
            self.log.replace(kept)
        paths.write_private(
            path,
            json.dumps(
                {
                    "pid": self.process.pid,
                    "port": self.port,
                    "code": self.process.returncode,
                    "log": str(kept),
                }
            ),
        )
        return kept

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> None:
        """Ask the server to end (SIGINT), and kill it after 10 s or once ``hurry()``."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        while not hurry() and time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
                return
        proc.kill()
        proc.wait(timeout=10)

    def record(self, path: Path | None = None) -> None:
        """Let other drag commands find and reuse this server."""
        paths.write_private(path or state_file(), json.dumps(asdict(self.info)))

    @property
    def info(self) -> ServerInfo:
        assert self.process is not None
        return ServerInfo(self.process.pid, self.port, str(self.model_path), self.api_key)

    def forget(self, path: Path | None = None) -> None:
        """Take the record away, unless it names another server by now."""
        path = path or state_file()
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            pid = int(json.loads(path.read_text("utf-8"))["pid"])
            if self.process is None or pid == self.process.pid:
                path.unlink()


def _death_signal() -> Callable[[], None] | None:
    """What the server's process runs before exec on Linux: end with the keeper, even if
    the keeper is killed outright, so that no server outlives its keeper."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None).prctl
    return lambda: prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# Keepers this process started: held so that no Popen of a running keeper is collected.
_KEEPERS: list[subprocess.Popen[bytes]] = []


def _start_shared(model_path: Path, n_ctx: int, keep_alive: float, timeout: float) -> ServerInfo:
    """Start a keeper for a shared server and wait until it records the server."""
    record, _lease, log = shared_files(model_path, n_ctx)
    with paths.open_private(log) as out:
        keeper = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "assistant.models.localserver",
                str(model_path),
                "--n-ctx",
                str(n_ctx),
                "--keep-alive",
                str(keep_alive),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl+C in this terminal is not the server's
        )
    _KEEPERS.append(keeper)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if keeper.poll() is not None:  # its last line says why
            why = _tail(log, 1).removeprefix("drag: ")
            raise TeacherError(why or f"the local teacher could not start (log: {log})")
        info = _recorded(record, model_path)
        if info is not None:
            return info
        time.sleep(0.25)
    keeper.terminate()
    raise TeacherError(f"the local teacher server did not start within {timeout:g} s (log: {log})")


def keep(model_path: Path, n_ctx: int, keep_alive: float) -> int:
    """The keeper: run the shared server until no lease has been held for ``keep_alive``
    seconds (or the server ends, or this process is told to stop)."""
    stops = signals.StopOnce()
    signals.stop_on(stops)
    record, lease, log = shared_files(model_path, n_ctx)
    server = LocalServer(model_path, n_ctx=n_ctx, log=log.with_suffix(".server.log"))
    try:
        server.start(die_with_parent=True)
        server.record(record)
        idle_since: float | None = None
        looked = 0
        while server.process is not None and server.process.poll() is None:
            time.sleep(POLL_SECONDS)
            with _deciding():
                leased = _leased(lease)
                looked += 1
                with contextlib.suppress(OSError):  # a sign of life only: never a reason to stop
                    _note_looks(record, looked)
                if leased:
                    idle_since = None
                    continue
                now = time.monotonic()
                idle_since = now if idle_since is None else idle_since
                if now - idle_since >= keep_alive:
                    server.forget(record)  # under the lock: no process picks it up now
                    break
        code = server.ended()
        if code is not None:  # it died by itself: its users are told how
            log = server.write_exit(exit_file(record))
            print(f"drag: {crash_line(code, log)}", flush=True)
            return 1
    except KeyboardInterrupt:
        pass
    except DragError as exc:  # its last line is what the drag process that started it says
        print(f"drag: {exc}", flush=True)
        return 1
    finally:
        stops.stopping()
        server.forget(record)
        server.stop(stops.hurried)
        # Not under _deciding() (its starter holds it); another keeper's count is left.
        with contextlib.suppress(OSError):
            if not record.exists():
                looks_file(record).unlink(missing_ok=True)
    return 0


def looks_file(record: Path) -> Path:
    """Where a keeper counts its looks for leases: a sign of life that can be waited on."""
    return record.with_suffix(".looks")


def _note_looks(record: Path, count: int) -> None:
    paths.write_private(spare := looks_file(record).with_suffix(".looks.new"), str(count))
    spare.replace(looks_file(record))


def looks(model_path: Path, n_ctx: int) -> int:
    """How many times the keeper of this model and context's shared server has looked
    for leases (0 when none runs)."""
    try:
        return int(looks_file(shared_files(model_path, n_ctx)[0]).read_text("ascii"))
    except (OSError, ValueError):
        return 0


def _lease(model_path: Path, n_ctx: int) -> tuple[IO[bytes], ServerInfo | None]:
    """A lease on the shared server for this model and context, taken before any keeper
    can look for leases, and that server's record if it runs.  Call it while _deciding."""
    record, lease_path, _log = shared_files(model_path, n_ctx)
    lease = _take_lease(lease_path)
    return lease, _recorded(record, model_path)


@contextlib.contextmanager
def holding_shared(model_path: Path, *, n_ctx: int) -> Iterator[ServerInfo | None]:
    """The shared server for this model and context, held (a lease) until the context
    ends, if one runs; None if none does or this system has no leases."""
    if _fcntl() is None:
        yield None
        return
    with _deciding():
        lease, info = _lease(model_path, n_ctx)
    if info is None:
        lease.close()
        yield None
        return
    try:
        yield info
    finally:
        lease.close()


@contextlib.contextmanager
def serving(
    model_path: Path,
    *,
    n_ctx: int,
    keep_alive: float = 0.0,
    timeout: float = 180.0,
    starting: Callable[[], None] = lambda: None,
) -> Iterator[ServerInfo]:
    """A local teacher (its base URL and key): a running ``drag teacher serve``, else the
    shared server for this model, started if there is none (``starting`` is told first).
    This process holds a lease on the shared server until the context ends."""
    existing = running(model_path)
    if existing is not None:
        _served[existing.base_url] = (existing.pid, exit_file(state_file()))
        yield existing
        return
    if _fcntl() is None:  # no leases here: a server of this command's own
        starting()
        server = LocalServer(model_path, n_ctx=n_ctx)
        server.start(timeout=timeout)
        try:
            yield server.info
        finally:
            server.stop()
        return
    with _deciding():
        lease, info = _lease(model_path, n_ctx)
        try:
            if info is None:
                starting()
                # The build's check, here and not in the keeper: it can take a model load
                # or more, which the keeper's start timeout is not for.
                llamacheck.ready(model_path)
                info = _start_shared(model_path, n_ctx, keep_alive, timeout)
        except BaseException:
            lease.close()
            raise
    _served[info.base_url] = (info.pid, exit_file(shared_files(model_path, n_ctx)[0]))
    try:
        yield info
    finally:
        lease.close()


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m assistant.models.localserver",
        description="Keeper of a shared local teacher server (started by drag itself).",
    )
    parser.add_argument("model", type=Path)
    parser.add_argument("--n-ctx", type=int, required=True)
    parser.add_argument("--keep-alive", type=float, default=0.0)
    args = parser.parse_args(argv)
    return keep(args.model, args.n_ctx, args.keep_alive)


if __name__ == "__main__":
    signals.exit_stopped(main())
