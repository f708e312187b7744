"""The check that llama.cpp computes here, in a child process, before it does in the app.

:func:`ready` gives the CPU code (a portable build's variant, see
:mod:`assistant.models.llamabuild`) that computed a few tokens with a model on this machine: the
best by llama.cpp's score whose child lived.  A variant whose child died of a fault
(SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT) is skipped for the next best.  The verdict is
kept in ``<cache dir>/llama-build.json``, keyed on the build's files, this CPU, the model
and GPU use, so the check costs one model load, once; a build that dies with every
variant is kept as that error.  A child stopped any other way (Ctrl+C, the out-of-memory
killer, a time limit) says nothing of the build: it is an error, and nothing is kept.
:func:`prepare` then loads the variant into this process.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from assistant.base import paths
from assistant.base.errors import ModelError
from assistant.models import llamabuild

PROBE_TIMEOUT = 600.0
VERDICTS = "llama-build.json"
# How llama.cpp dies when its code does not run on this CPU or system.
FAULTS = frozenset({signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT})
FIX = "fix: `make llama`"
REBUILD = "reinstall llama-cpp-python portable: `make llama` in the drag-assistant checkout"


def _cpu_id() -> str:
    """This CPU as the verdict knows it: its model name and flags (Linux), else the machine."""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text("utf-8", "replace")
        keep = [ln for ln in text.splitlines() if ln.startswith(("model name", "flags"))][:2]
        return "\n".join(keep)
    import platform

    return f"{platform.machine()} {platform.processor()}"


def _fingerprint(files: Sequence[Path]) -> str:
    parts = []
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            parts.append(f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    return "\n".join(parts)


def verdict_key(model: Path, gpu_layers: int, only: Path | None = None) -> str:
    """The build (every library file), this CPU, the model file, GPU use, and the one
    variant a check was held to (see :func:`prepare`)."""
    text = "\n".join(
        [
            _fingerprint(sorted(llamabuild.lib_dir().glob("*"))),
            _cpu_id(),
            _fingerprint([model]),
            f"gpu_layers={gpu_layers}",
            f"only={only}",
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _verdicts_file() -> Path:
    return paths.cache_dir() / VERDICTS


def _read_verdicts() -> dict[str, Any]:
    try:
        data = json.loads(_verdicts_file().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_verdict(key: str, verdict: dict[str, Any]) -> None:
    """Add one verdict (atomically: other drag processes may read the file meanwhile)."""
    path = _verdicts_file()
    data = _read_verdicts()
    data[key] = verdict
    paths.private_dir(path.parent)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    paths.write_private(tmp, json.dumps(data, indent=1))
    tmp.replace(path)


@dataclass(frozen=True)
class Verdict:
    variant: Path | None  # the CPU variant to load; None: a build for one CPU
    seconds: float  # the check's time (0 when it was known from an earlier run)
    skipped: tuple[str, ...] = ()  # variants whose check died: "alderlake (killed by SIGILL …)"
    checked: bool = False  # True when it was checked in this call
    error: str = ""  # the child failed cleanly (a bad model file): loading here says why

    @property
    def name(self) -> str:
        return llamabuild.variant_name(self.variant)


def describe_exit(code: int) -> str:
    """``killed by SIGSEGV (segmentation fault)`` or ``exited with code 3``."""
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"killed by signal {-code}"
        what = signal.strsignal(sig) or ""
        return f"killed by {sig.name}" + (f" ({what.lower()})" if what else "")
    return f"exited with code {code}"


def probe_command(model: Path, gpu_layers: int, variant: Path | None) -> list[str]:
    """The child that loads ``model`` and computes a few tokens with ``variant``."""
    command = [sys.executable, "-m", "assistant.models.llamabuild", "probe", str(model)]
    command += ["--gpu-layers", str(gpu_layers)]
    if variant is not None:
        command += ["--cpu", str(variant)]
    return command


def _child_setup() -> None:
    """In the child before it runs: no core file of a crash that is expected here."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    how: str = ""  # how the child ended, when it failed
    fault: bool = False  # it died of a fault: a verdict on the build
    error: str = ""  # the child's own error, when it gave one


def _probe_once(model: Path, gpu_layers: int, variant: Path | None, log: IO[bytes]) -> _Outcome:
    command = probe_command(model, gpu_layers, variant)
    log.write(f"== {llamabuild.variant_name(variant)}: {' '.join(command)}\n".encode())
    log.flush()
    try:
        proc = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=PROBE_TIMEOUT,
            check=False,
            # Ctrl+C in the terminal is the app's to handle, not a crash of the child.
            start_new_session=True,
            preexec_fn=_child_setup if sys.platform != "win32" else None,
        )
    except subprocess.TimeoutExpired:
        return _Outcome(False, how=f"gave no answer within {PROBE_TIMEOUT:g} s")
    if proc.returncode == 0:
        return _Outcome(True)
    last = proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1:]
    with contextlib.suppress(ValueError, IndexError, AttributeError):
        reported = json.loads(last[0])
        if isinstance(reported, dict) and reported.get("error"):
            return _Outcome(False, error=str(reported["error"]))
    fault = proc.returncode < 0 and -proc.returncode in FAULTS
    return _Outcome(False, how=describe_exit(proc.returncode), fault=fault)


def _known(key: str) -> Verdict | None:
    """The verdict an earlier check left for this key; raises the error it left."""
    known = _read_verdicts().get(key)
    if not isinstance(known, dict):
        return None
    if known.get("error"):
        raise ModelError(str(known["error"]))
    variant = Path(known["variant"]) if known.get("variant") else None
    if variant is not None and not variant.is_file():
        return None
    return Verdict(variant, 0.0, tuple(known.get("skipped", ())))


@contextlib.contextmanager
def _one_check_at_a_time() -> Iterator[None]:
    """One check per machine at a time: the student and the local teacher start together,
    and two checks of one model would only slow each other down."""
    try:
        import fcntl
    except ImportError:  # Windows: each process checks for itself
        yield
        return
    with paths.open_private(paths.cache_dir() / "llama-build.lock") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ready(
    model: Path,
    *,
    gpu_layers: int = 0,
    status: Callable[[str], None] = lambda _m: None,
    only: Path | None = None,
) -> Verdict:
    """The CPU variant that computes with ``model`` here (``only``: that variant or
    none), checked in a child process the first time.  Raises :class:`ModelError` when
    llama.cpp dies with every candidate: nothing of it is then loaded into this process."""
    key = verdict_key(model, gpu_layers, only)
    known = _known(key)
    if known is not None:
        return known
    with _one_check_at_a_time():
        known = _known(key)  # another process may have checked meanwhile
        if known is not None:
            return known
        # No variant that scores above 0: a build for one CPU (or none fits: loading says so).
        candidates: list[Path | None] = [only] if only else (list(llamabuild.ranked()) or [None])
        status("checking that llama.cpp computes on this CPU (once per build)…")
        log = paths.private_dir(paths.cache_dir()) / f"llama-probe-{key[:12]}.log"
        with paths.open_private(log) as out:  # every try of this check, one after the other
            return _check(key, model, gpu_layers, candidates, log, out)


def _check(
    key: str,
    model: Path,
    gpu_layers: int,
    candidates: Sequence[Path | None],
    log: Path,
    out: IO[bytes],
) -> Verdict:
    skipped: list[str] = []
    hows: list[str] = []
    started = time.perf_counter()
    for variant in candidates:
        outcome = _probe_once(model, gpu_layers, variant, out)
        seconds = time.perf_counter() - started
        if outcome.error:  # the model or the build failed cleanly: the load says why
            return Verdict(variant, seconds, tuple(skipped), True, outcome.error)
        if outcome.ok:
            record = {"variant": str(variant) if variant else None, "skipped": skipped}
            _write_verdict(key, {**record, "seconds": round(seconds, 2), "model": str(model)})
            return Verdict(variant, seconds, tuple(skipped), True)
        if not outcome.fault:  # stopped, not crashed: nothing to say of the build
            raise ModelError(
                f"llama.cpp's check in a test process ended ({outcome.how}); "
                f"the next start checks again (log: {log})"
            )
        skipped.append(f"{llamabuild.variant_name(variant)} ({outcome.how})")
        hows.append(outcome.how)
    gpu = "; with student.gpu off it may run on the CPU" if gpu_layers else ""
    if len(candidates) == 1:
        error = (
            f"llama.cpp was {hows[0]} on a first token in a test process: this build does "
            f"not run here, so the model is not loaded{gpu}; {FIX} (log: {log})"
        )
    else:
        error = (
            f"llama.cpp died on a first token with each of the {len(candidates)} CPU variants "
            f"that fit this CPU ({', '.join(sorted(set(hows)))}), so the model is not "
            f"loaded{gpu}; {FIX} (log: {log})"
        )
    _write_verdict(key, {"error": error, "skipped": skipped, "model": str(model)})
    raise ModelError(error)


def prepare(
    model: Path, *, gpu_layers: int = 0, status: Callable[[str], None] = lambda _m: None
) -> Verdict:
    """:func:`ready`, then that variant loaded into this process: call it before llama.cpp
    loads ``model`` here.  When this process already runs another variant (a second
    model, whose check chose differently), that one is checked with this model instead:
    one process runs one CPU variant."""
    verdict = ready(model, gpu_layers=gpu_layers, status=status)
    loaded = llamabuild.loaded_cpu()
    if loaded is not None and loaded != verdict.variant:
        verdict = ready(model, gpu_layers=gpu_layers, status=status, only=loaded)
    llamabuild.load_cpu(verdict.variant)
    return verdict
