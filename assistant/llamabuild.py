"""The llama.cpp build in use: which CPU code it runs, and a check that it computes.

A portable build (``packaging/build-llama.sh``) carries llama.cpp's CPU backend as one
library per CPU level, ``libggml-cpu-<variant>.so`` beside ``libllama.so``; each says
how well it fits this CPU (``ggml_backend_score``: 0 when the CPU lacks an instruction it
uses).  llama.cpp would pick the best one itself, but a CPU can report an instruction
that the system does not let a process use: AMX on some virtual machines, where the
best variant faults on its first matrix product.  So nothing here trusts the score
alone.  Before llama.cpp computes anything in this process, a child process loads the
model and computes a few tokens with the variant to be used (:func:`ready`); a variant
whose child dies is skipped for the next best, and the verdict is kept per build, CPU
and model in the cache folder, so this costs one model load once.  A build without
variants (compiled for one CPU) is checked the same way; when its child dies, the
student is not loaded and the error names the signal and how to rebuild.

``python -m assistant.llamabuild probe MODEL ...`` is that child;
``python -m assistant.llamabuild run --cpu PATH llama_cpp.server ARGS`` runs the server
of the embedded teacher with the chosen variant.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from assistant import paths
from assistant.errors import ModelError

REBUILD = "rebuild llama-cpp-python portable: `make llama` in the drag-assistant checkout"
PROBE_TIMEOUT = 600.0
PROBE_TOKENS = 4
# About 70 tokens: enough for llama.cpp to take its batched matrix path, as an answer does.
PROBE_PROMPT = (
    "Question: Which gas do plants take in from the air to make their food? "
    "Evidences: Plants take in carbon dioxide through small openings in their leaves. "
    "Sunlight gives the energy that turns carbon dioxide and water into sugar. "
    "Oxygen is given off as a by-product. Answer in one word:"
)
VERDICTS = "llama-build.json"


def lib_dir() -> Path:
    """The folder of llama-cpp-python's shared libraries."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def _suffix() -> str:
    return ".dll" if sys.platform == "win32" else (".dylib" if sys.platform == "darwin" else ".so")


def _prefix() -> str:
    return "" if sys.platform == "win32" else "lib"


def cpu_variants(folder: Path | None = None) -> list[Path]:
    """The CPU backend libraries of a dynamic-backend build, one per CPU level (none in a
    build for one CPU, whose ``libggml-cpu.so`` is linked in, not loaded)."""
    folder = folder or lib_dir()
    stem = f"{_prefix()}ggml-cpu"
    found = sorted(folder.glob(f"{stem}-*{_suffix()}"))
    single = folder / f"{stem}{_suffix()}"
    if not found and single.is_file() and _exports(single, "ggml_backend_init"):
        found = [single]  # a dynamic-backend build without variants
    return found


def _exports(path: Path, symbol: str) -> bool:
    _libggml()  # its dependencies first
    try:
        return hasattr(ctypes.CDLL(str(path)), symbol)
    except OSError:
        return False


def other_backends(folder: Path | None = None) -> list[Path]:
    """GPU and other backend libraries of a dynamic-backend build (CUDA, Vulkan, …)."""
    folder = folder or lib_dir()
    if not cpu_variants(folder):
        return []  # a build for one CPU links its backends in
    names = {f"{_prefix()}ggml{_suffix()}", f"{_prefix()}ggml-base{_suffix()}"}
    return sorted(
        p
        for p in folder.glob(f"{_prefix()}ggml-*{_suffix()}")
        if p.name not in names and p not in cpu_variants(folder)
    )


def variant_name(path: Path | None) -> str:
    """``haswell`` for ``libggml-cpu-haswell.so``; ``built-in`` for a build for one CPU."""
    if path is None:
        return "built-in"
    name = path.name.removeprefix(_prefix()).removesuffix(_suffix())
    return name.removeprefix("ggml-cpu-") if name != "ggml-cpu" else "cpu"


def _mapped(stem: str) -> str | None:
    """The file of a library whose name starts with ``stem`` that this process has mapped
    from llama-cpp-python's folder (Linux), if any."""
    folder = str(lib_dir())
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1]
            if path.startswith(folder) and Path(path).name.startswith(stem):
                return path
    return None


def _libggml() -> Any:
    """libggml, the copy libllama uses.  A wheel holds no symbolic links, so libggml.so and
    libggml.so.0 are two files there, and loading the first by name gives a second ggml
    with a backend registry of its own that llama.cpp never sees."""
    import llama_cpp  # noqa: F401  (maps libllama, and the libggml it was linked with)

    path = _mapped(f"{_prefix()}ggml{_suffix()}")
    if path is None:  # no /proc: llama-cpp-python's own handle
        from llama_cpp import _ggml

        return _typed(_ggml.libggml)
    return _typed(ctypes.CDLL(path))


def _typed(lib: Any) -> Any:
    lib.ggml_backend_load.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_load.restype = ctypes.c_void_p
    lib.ggml_backend_register.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_register.restype = None
    return lib


def score(path: Path) -> int:
    """How well a CPU variant fits this CPU, by its own measure (0: it cannot run here)."""
    _libggml()  # its dependencies first
    handle = ctypes.CDLL(str(path))
    try:
        fn = getattr(handle, "ggml_backend_score", None)
        if fn is None:
            return 1  # a single CPU backend: it runs wherever the build does
        fn.restype = ctypes.c_int
        return int(fn())
    finally:
        if sys.platform != "win32":  # as llama.cpp does after scoring: only the chosen stays
            import _ctypes

            with contextlib.suppress(OSError):
                _ctypes.dlclose(handle._handle)


def ranked(folder: Path | None = None) -> list[Path]:
    """The variants that can run on this CPU by their score, best first."""
    scored = [(score(p), p) for p in cpu_variants(folder)]
    return [p for s, p in sorted(scored, key=lambda sp: (-sp[0], sp[1].name)) if s > 0]


_loaded: dict[str, Path | None] = {}
_loading = threading.Lock()
_kept: list[ctypes.CDLL] = []  # the loaded CPU variant: never closed


def load_other_backends() -> None:
    """Load the GPU backends of a dynamic-backend build into this process, once."""
    with _loading:
        if "other" in _loaded:
            return
        lib = None
        for path in other_backends():
            lib = lib or _libggml()
            lib.ggml_backend_load(str(path).encode())
        _loaded["other"] = None


def load_cpu(variant: Path | None) -> None:
    """Load this CPU variant into this process (once; ``None``: a build for one CPU)."""
    load_other_backends()
    with _loading:
        if "cpu" in _loaded:
            if _loaded["cpu"] != variant:
                raise ModelError(
                    f"llama.cpp already runs the CPU variant {variant_name(_loaded['cpu'])} "
                    f"in this process, not {variant_name(variant)}"
                )
            return
        if variant is not None:
            _register(variant)
        _loaded["cpu"] = variant


def _register(variant: Path) -> None:
    """Register this CPU variant with llama.cpp.  Not through ``ggml_backend_load``, which
    asks the variant's score again: the choice is made here (:func:`ranked`, then the check
    in a child), and the check of a variant this CPU lacks must be able to run it."""
    lib = _libggml()
    try:
        handle = ctypes.CDLL(str(variant))
        init = handle.ggml_backend_init
    except (OSError, AttributeError) as exc:
        raise ModelError(f"llama.cpp could not load its CPU backend {variant}: {exc}") from None
    init.restype = ctypes.c_void_p
    reg = init()
    if not reg:
        raise ModelError(f"llama.cpp's CPU backend {variant} did not start")
    lib.ggml_backend_register(reg)
    _kept.append(handle)


def system_info() -> str:
    """What the loaded build uses (``AVX2 = 1 | FMA = 1 | …``)."""
    import llama_cpp

    return str(llama_cpp.llama_print_system_info().decode("utf-8", "replace")).strip()


def features() -> str:
    """The instruction sets the loaded CPU code uses, from llama.cpp's own report
    (``AVX2 FMA F16C BMI2``)."""
    on = []
    for part in system_info().split("|"):
        name, _, value = part.rpartition("=")
        name = name.split(":")[-1].strip()
        if value.strip() == "1" and name and name not in on:
            on.append(name)
    return " ".join(on) or "no CPU extensions"


# -- the verdict ------------------------------------------------------------------------


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


def verdict_key(model: Path, gpu_layers: int) -> str:
    """The build (every library file), this CPU, the model file and GPU use."""
    folder = lib_dir()
    text = "\n".join(
        [
            _fingerprint(sorted(folder.glob("*"))),
            _cpu_id(),
            _fingerprint([model]),
            f"gpu_layers={gpu_layers}",
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
    skipped: tuple[str, ...] = ()  # variants whose check died: "sapphirerapids (SIGSEGV)"
    checked: bool = False  # True when it was checked in this call

    @property
    def name(self) -> str:
        return variant_name(self.variant)


def describe_exit(code: int) -> str:
    """``killed by SIGSEGV (segmentation fault)`` or ``exit code 3``."""
    if code < 0:
        try:
            sig = signal.Signals(-code)
        except ValueError:
            return f"killed by signal {-code}"
        what = signal.strsignal(sig) or ""
        return f"killed by {sig.name}" + (f" ({what.lower()})" if what else "")
    return f"exit code {code}"


def probe_command(model: Path, gpu_layers: int, variant: Path | None) -> list[str]:
    """The child that loads ``model`` and computes a few tokens with ``variant``."""
    command = [sys.executable, "-m", "assistant.llamabuild", "probe", str(model)]
    command += ["--gpu-layers", str(gpu_layers)]
    if variant is not None:
        command += ["--cpu", str(variant)]
    return command


@dataclass(frozen=True)
class _Outcome:
    ok: bool
    crashed: str = ""  # how the child died, when it did
    error: str = ""  # the child's own error, when it gave one
    timed_out: bool = False


def _probe_once(model: Path, gpu_layers: int, variant: Path | None, log: IO[bytes]) -> _Outcome:
    command = probe_command(model, gpu_layers, variant)
    log.write(f"== {variant_name(variant)}: {' '.join(command)}\n".encode())
    log.flush()
    try:
        proc = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return _Outcome(False, crashed=f"gave no answer within {PROBE_TIMEOUT:g} s", timed_out=True)
    if proc.returncode == 0:
        return _Outcome(True)
    last = proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1:]
    with contextlib.suppress(ValueError, IndexError, AttributeError):
        reported = json.loads(last[0])
        if isinstance(reported, dict) and reported.get("error"):
            return _Outcome(False, error=str(reported["error"]))
    return _Outcome(False, crashed=describe_exit(proc.returncode))


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
    """One check per machine at a time: the student and the local teacher's keeper start
    together, and two checks of one model would only slow each other down."""
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
    model: Path, *, gpu_layers: int = 0, status: Callable[[str], None] = lambda _m: None
) -> Verdict:
    """The CPU variant that computes with ``model`` here, checked in a child process the
    first time (see the module's text).  Raises :class:`ModelError` when llama.cpp dies
    with every candidate: nothing of it is then loaded into this process.  That verdict
    is kept as well (a rebuild changes the build's files, and so the key)."""
    key = verdict_key(model, gpu_layers)
    known = _known(key)
    if known is not None:
        return known
    with _one_check_at_a_time():
        known = _known(key)  # another process may have checked meanwhile
        if known is not None:
            return known
        return _check(key, model, gpu_layers, status)


def _check(key: str, model: Path, gpu_layers: int, status: Callable[[str], None]) -> Verdict:
    # No variant that scores above 0: a build for one CPU (or none fits: its load says so).
    candidates: list[Path | None] = list(ranked()) or [None]
    status("checking that llama.cpp computes on this CPU (once per build)…")
    log = paths.private_dir(paths.cache_dir()) / "llama-probe.log"
    with paths.open_private(log) as out:  # every try of this check, one after the other
        return _check_each(key, model, gpu_layers, candidates, log, out)


def _check_each(
    key: str,
    model: Path,
    gpu_layers: int,
    candidates: Sequence[Path | None],
    log: Path,
    out: IO[bytes],
) -> Verdict:
    skipped: list[str] = []
    started = time.perf_counter()
    for variant in candidates:
        outcome = _probe_once(model, gpu_layers, variant, out)
        if outcome.error:  # the model or the build failed cleanly: the load says why
            return Verdict(variant, time.perf_counter() - started, tuple(skipped), True)
        if outcome.ok:
            verdict = Verdict(variant, time.perf_counter() - started, tuple(skipped), True)
            _write_verdict(
                key,
                {
                    "variant": str(variant) if variant else None,
                    "skipped": skipped,
                    "seconds": round(verdict.seconds, 2),
                    "model": str(model),
                },
            )
            return verdict
        if outcome.timed_out:  # a slow or busy machine: not a verdict on the build
            raise ModelError(
                f"llama.cpp {outcome.crashed} on a first token in a test process; try again "
                f"(log: {log})"
            )
        skipped.append(f"{variant_name(variant)} ({outcome.crashed})")
    if list(candidates) == [None]:
        error = (
            f"llama.cpp was {outcome.crashed} on a first token in a test process: this build "
            f"does not run on this CPU, so the model is not loaded; fix: `make llama` "
            f"(log: {log})"
        )
    else:
        error = (
            f"llama.cpp died on a first token of {model.name} with every CPU variant of this "
            f"build ({', '.join(skipped)}), so the model is not loaded (log: {log})"
        )
    _write_verdict(key, {"error": error, "model": str(model)})
    raise ModelError(error)


def prepare(
    model: Path, *, gpu_layers: int = 0, status: Callable[[str], None] = lambda _m: None
) -> Verdict:
    """:func:`ready`, then that variant loaded into this process: call it before llama.cpp
    loads ``model`` here."""
    verdict = ready(model, gpu_layers=gpu_layers, status=status)
    load_cpu(verdict.variant)
    return verdict


# -- the child processes ----------------------------------------------------------------


def _probe_main(model: str, gpu_layers: int, cpu: str | None) -> int:
    try:
        import llama_cpp

        load_cpu(Path(cpu) if cpu else None)
        llm = llama_cpp.Llama(
            model_path=model, n_ctx=512, n_gpu_layers=gpu_layers, verbose=True, seed=0
        )
        started = time.perf_counter()
        out = llm.create_completion(PROBE_PROMPT, max_tokens=PROBE_TOKENS, temperature=0.0)
        seconds = time.perf_counter() - started
        usage: Any = out["usage"]  # type: ignore[index]
    except Exception as exc:  # reported to the parent, which loads the model and says why
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 3
    info = {"ok": True, "seconds": round(seconds, 3), "usage": usage, "system": system_info()}
    print(json.dumps(info), flush=True)
    return 0


def run_command(cpu: Path | None) -> list[str]:
    """The start of a command that runs a module (``llama_cpp.server``, then its arguments)
    with the CPU variant ``cpu`` loaded first."""
    command = [sys.executable, "-m", "assistant.llamabuild", "run"]
    return [*command, "--cpu", str(cpu)] if cpu is not None else command


def _run_main(cpu: str | None, module: str, args: list[str]) -> int:
    import runpy

    load_cpu(Path(cpu) if cpu else None)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m assistant.llamabuild")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe", help="load MODEL and compute a few tokens")
    probe.add_argument("model")
    probe.add_argument("--gpu-layers", type=int, default=0)
    probe.add_argument("--cpu", help="the CPU variant library to load")
    run = sub.add_parser("run", help="run MODULE with this CPU variant loaded first")
    run.add_argument("--cpu", help="the CPU variant library to load")
    run.add_argument("module")
    run.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if ns.command == "probe":
        return _probe_main(ns.model, ns.gpu_layers, ns.cpu)
    return _run_main(ns.cpu, ns.module, ns.args)


if __name__ == "__main__":
    sys.exit(main())
