"""The llama.cpp build in use: which CPU code it has, and loading the one chosen.

A portable build (``packaging/build-llama.sh``) carries llama.cpp's CPU backend as one
library per CPU level, ``libggml-cpu-<variant>.so`` beside ``libllama.so``; each says
how well it fits this CPU (``ggml_backend_score``: 0 when the CPU lacks an instruction it
uses).  A CPU can report an instruction that the system does not let a process use (AMX
on some virtual machines), so the best by score is not loaded on trust:
:mod:`assistant.models.llamacheck` checks it in a child process first, and this module loads
what that check chose.  A build compiled for one CPU has no variants: its CPU code is
linked in, and only the check applies.

``python -m assistant.models.llamabuild probe MODEL ...`` is the check's child;
``python -m assistant.models.llamabuild run --cpu PATH llama_cpp.server ARGS`` runs the server
of the embedded teacher with the chosen variant.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from assistant.base.errors import ModelError

PROBE_TOKENS = 4
# About 70 tokens: enough for llama.cpp to take its batched matrix path, as an answer does.
PROBE_PROMPT = (
    "Question: Which gas do plants take in from the air to make their food? "
    "Evidences: Plants take in carbon dioxide through small openings in their leaves. "
    "Sunlight gives the energy that turns carbon dioxide and water into sugar. "
    "Oxygen is given off as a by-product. Answer in one word:"
)


def lib_dir() -> Path:
    """The folder of llama-cpp-python's shared libraries."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def _suffix() -> str:
    """Of a loadable backend: ggml names them ``.so`` on every system but Windows."""
    return ".dll" if sys.platform == "win32" else ".so"


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
    variants = cpu_variants(folder)
    if not variants:
        return []  # a build for one CPU links its backends in
    names = {f"{_prefix()}ggml{_suffix()}", f"{_prefix()}ggml-base{_suffix()}"}
    names.update(p.name for p in variants)
    return sorted(p for p in folder.glob(f"{_prefix()}ggml-*{_suffix()}") if p.name not in names)


def variant_name(path: Path | None) -> str:
    """``haswell`` for ``libggml-cpu-haswell.so``; ``built-in`` for a build for one CPU."""
    if path is None:
        return "built-in"
    name = path.name.removeprefix(_prefix()).removesuffix(_suffix())
    return name.removeprefix("ggml-cpu-") if name != "ggml-cpu" else "cpu"


def _mapped(stem: str) -> str | None:
    """The file of a library whose name starts with ``stem`` that this process has mapped
    from llama-cpp-python's folder (Linux; the kernel names files by their real path)."""
    folder = os.path.realpath(lib_dir())
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1]
            if Path(path).name.startswith(stem) and str(Path(path).parent) == folder:
                return path
    return None


@functools.cache
def _libggml() -> Any:
    """libggml, the copy libllama uses (found once per process).  A wheel holds no
    symbolic links, so libggml.so and libggml.so.0 are two files there, and loading the
    first by name gives a second ggml with a backend registry of its own that llama.cpp
    never sees."""
    import llama_cpp  # noqa: F401  (maps libllama, and the libggml it was linked with)

    path = _mapped(f"{_prefix()}ggml{_suffix()}")
    if path is None:  # no /proc: the name libllama asks for, else llama-cpp-python's own
        linked = lib_dir() / f"{_prefix()}ggml{_suffix()}.0"
        if linked.is_file():
            return _typed(ctypes.CDLL(str(linked)))
        from llama_cpp import _ggml

        return _typed(_ggml.libggml)
    return _typed(ctypes.CDLL(path))


def _typed(lib: Any) -> Any:
    lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
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


def loaded_cpu() -> Path | None:
    """The CPU variant this process runs (None: none, or a build for one CPU)."""
    return _loaded.get("cpu")


def has_gpu() -> bool | None:
    """Whether a GPU backend of a dynamic-backend build found a device (None: a build for
    one CPU, which llama.cpp asks itself).  Asked of ggml directly: llama.cpp's own
    question loads every backend it finds in the current folder when none is registered
    yet, and the CPU code is registered only after its check."""
    if not cpu_variants():
        return None
    load_other_backends()
    lib = _libggml()
    return any(lib.ggml_backend_dev_by_type(kind) for kind in (1, 2))  # GPU, IGPU


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
    command = [sys.executable, "-m", "assistant.models.llamabuild", "run"]
    return [*command, "--cpu", str(cpu)] if cpu is not None else command


def _run_main(cpu: str | None, module: str, args: list[str]) -> int:
    import runpy

    load_cpu(Path(cpu) if cpu else None)
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m assistant.models.llamabuild")
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
