"""Settings: one schema, four layers.

Precedence, highest first: command-line flag > environment variable >
config file (TOML) > default.  Every effective value remembers where it came
from, so ``drag config show`` can say so.

Keys are ``section.name``; the environment variable for a key is
``DRAG_SECTION_NAME`` (``teacher.endpoint`` -> ``DRAG_TEACHER_ENDPOINT``).
Secrets are never settings: the teacher API key comes from the environment or
the system keyring (see ``assistant.base.secrets``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from assistant.base import paths
from assistant.base.endpoint import check_endpoint
from assistant.base.errors import ConfigError, FlagError

Mode = Literal["evidence", "graph", "combined", "none"]
MODES: tuple[str, ...] = get_args(Mode)
# The student's prompt: the question first (the paper's order) or the context first.
Order = Literal["question-first", "context-first"]
ORDERS: tuple[str, ...] = get_args(Order)
Gate = Literal["auto", "gate", "always-evidence", "never"]
Structured = Literal["auto", "json_schema", "json_object", "off"]
Source = Literal["default", "file", "env", "flag"]

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct"
# A context window in tokens (past the longest any model is trained for: a typo, which had
# llama.cpp allocate its cache until the system killed the process, with no word).
_CONTEXT = {"min": 512, "max": 262_144}
DAY = 86_400.0  # seconds: the longest wait a setting may ask for (a clock past it overflows)


@dataclass(frozen=True)
class StudentSettings:
    model: str = field(
        default=DEFAULT_MODEL, metadata={"help": "manifest name or path to a .gguf file"}
    )
    n_ctx: int = field(default=4096, metadata={"help": "context window in tokens", **_CONTEXT})
    gpu: Literal["auto", "off"] = field(
        default="auto", metadata={"help": "offload all layers when llama.cpp supports it"}
    )
    threads: int = field(
        default=0, metadata={"help": "CPU threads, 0 = llama.cpp's choice", "min": 0, "max": 1024}
    )
    max_tokens: int = field(default=384, metadata={"help": "longest answer", "min": 1})
    temperature: float = field(default=0.0, metadata={"help": "0 = deterministic", "min": 0})


@dataclass(frozen=True)
class TeacherSettings:
    endpoint: str = field(
        default="local",
        metadata={
            "help": '"local" (embedded llama.cpp server) or an OpenAI-compatible base URL',
            "check": check_endpoint,
        },
    )
    model: str = field(
        default="",
        metadata={"help": "model name at the endpoint; for local: manifest name or .gguf path"},
    )
    structured: Structured = field(
        default="auto",
        metadata={"help": "structured output: auto, json_schema, json_object (llama.cpp), off"},
    )
    timeout: float = field(
        default=300.0, metadata={"help": "seconds per request", "min": 1, "max": DAY}
    )
    max_retries: int = field(
        default=3,
        metadata={"help": "retries with backoff on 429/5xx/connection errors", "min": 0, "max": 10},
    )
    max_tokens: int = field(default=2048, metadata={"help": "longest teacher reply", "min": 16})
    temperature: float = field(default=0.0, metadata={"help": "sampling temperature", "min": 0})
    n_ctx: int = field(
        default=8192, metadata={"help": "context of the embedded local server", **_CONTEXT}
    )
    keep_alive: float = field(
        default=60.0,
        metadata={
            "help": "seconds the embedded local server stays up after the last drag process "
            "using it exits (0: it stops at once)",
            "min": 0,
        },
    )


@dataclass(frozen=True)
class PipelineSettings:
    mode: Mode = field(default="combined", metadata={"help": "context given to the student"})
    n: int = field(
        default=15,
        metadata={"help": "evidence statements asked of the teacher", "min": 1, "max": 50},
    )
    k: int = field(
        default=15,
        metadata={"help": "top evidence/triples given to the student", "min": 1, "max": 50},
    )
    max_question_chars: int = field(
        default=8000, metadata={"help": "longer questions are refused", "min": 1}
    )
    repeat_threshold: float = field(
        default=1.0,
        metadata={
            "help": "cosine at which a statement repeats one ranked above it and moves behind "
            "the others (1 = off)",
            "min": 0.5,
            "max": 1.0,
        },
    )
    context_tokens: int = field(
        default=0,
        metadata={
            "help": "most tokens of evidence and triples the student gets, best first "
            "(0 = K alone decides)",
            "min": 0,
        },
    )
    graph_timing: Literal["auto", "before-answer", "after-answer"] = field(
        default="auto",
        metadata={
            "help": "graph and combined modes: build the graph before the answer (the "
            "paper's way) or after it, answering from the evidence first; auto = after "
            "with the embedded local teacher, before with any other"
        },
    )
    order: Order = field(
        default="question-first",
        metadata={
            "help": "the student's prompt: the question, then the context (the paper's order), "
            "or the context first"
        },
    )
    gate: Gate = field(
        default="auto",
        metadata={
            "help": "auto: with the embedded local teacher the student answers alone and "
            "the evidence is shown beside it, with any other teacher the gate; gate: the "
            "student reads its reply with the context and alone (a choice: the context "
            "unless it leads to one the student alone found unlikely; a free reply: the "
            "surer way); always-evidence; never (the student alone; the teacher is still "
            "asked and its context shown and cached)"
        },
    )


@dataclass(frozen=True)
class PrivacySettings:
    rewrite: Literal["always", "on-detection", "never"] = field(
        default="on-detection",
        metadata={"help": "let the student drop personal context from the question (paper §3.3)"},
    )
    review: Literal["always", "on-detection", "never"] = field(
        default="on-detection",
        metadata={"help": "show original and sanitized text and ask before sending"},
    )
    allow: tuple[str, ...] = field(
        default=(), metadata={"help": "terms never redacted (comma-separated in the env var)"}
    )
    deny: tuple[str, ...] = field(
        default=(), metadata={"help": "terms always redacted (comma-separated in the env var)"}
    )
    categories: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "per-category modes over policy.yaml's, ENTITY=strict|contextual|off "
            "(comma-separated in the env var), e.g. LOCATION=strict"
        },
    )
    guard_timeout: float = field(
        default=10.0,
        metadata={
            "help": "seconds the egress guard may take; slower = not sent",
            "min": 0.1,
            "max": DAY,
        },
    )
    reader: Literal["on", "off"] = field(
        default="on",
        metadata={
            "help": "a local model also reads each question before an upload and lists the "
            "personal values it sees (added to the detector's)"
        },
    )
    reader_model: str = field(
        default="qwen2.5-coder-0.5b-instruct",
        metadata={
            "help": "the model that reads (a manifest name or a .gguf path); empty: the "
            "student's model"
        },
    )
    reader_timeout: float = field(
        default=90.0,
        metadata={
            "help": "seconds the reader may take for each 1,000 characters of the question "
            "(at least this); slower = not sent",
            "min": 0.1,
            "max": DAY,
        },
    )


@dataclass(frozen=True)
class EmbedderSettings:
    model: str = field(
        default="all-MiniLM-L6-v2",
        metadata={"help": "all-MiniLM-L6-v2 (bundled) or a local sentence-transformers folder"},
    )
    backend: Literal["onnx", "torch"] = field(
        default="onnx",
        metadata={
            "help": "onnx (ONNX Runtime) or torch (sentence-transformers, the [torch] extra)"
        },
    )
    device: Literal["cpu", "cuda"] = field(
        default="cpu",
        metadata={"help": "cpu, or cuda (onnx backend with onnxruntime-gpu: the [gpu] extra)"},
    )


MAX_DAYS = 36_500


@dataclass(frozen=True)
class StoreSettings:
    database: str = field(
        default="", metadata={"help": "SQLite file; empty = drag.db in the data folder"}
    )
    key: Literal["auto", "keyring", "file"] = field(
        default="auto",
        metadata={"help": "where the at-rest key lives: keyring, else a 0600 key file (auto)"},
    )
    cache: bool = field(
        default=True, metadata={"help": "answer from the local cache when it covers the question"}
    )
    offline: bool = field(
        default=False, metadata={"help": "never contact the teacher; answer from the cache only"}
    )
    near_duplicate: float = field(
        default=0.92,
        metadata={
            "help": "cosine at which a cached question counts as the same",
            "min": 0,
            "max": 1,
        },
    )
    coverage: float = field(
        default=0.55,
        metadata={
            "help": "mean cosine of retrieved cache items needed to answer offline",
            "min": 0,
            "max": 1,
        },
    )
    # At most a century: a date that far back is still a date (a million days was not).
    retention_days: int = field(
        default=0,
        metadata={
            "help": "drop ledger payloads older than this; 0 = keep",
            "min": 0,
            "max": MAX_DAYS,
        },
    )
    draft_days: int = field(
        default=30,
        metadata={
            "help": "delete kept (unsent) questions older than this; 0 = keep",
            "min": 0,
            "max": MAX_DAYS,
        },
    )


FilesMethod = Literal["minirag", "vector"]


@dataclass(frozen=True)
class FilesSettings:
    k: int = field(
        default=5,
        metadata={"help": "passages of your indexed files the student reads", "min": 1, "max": 20},
    )
    method: FilesMethod = field(
        default="minirag",
        metadata={"help": "search your files: MiniRAG's graph path with vectors, or vectors"},
    )
    learn_names: bool = field(
        default=True,
        metadata={"help": "names of people, firms and places in your files are personal"},
    )
    read_tokens: int = field(
        default=500,
        metadata={
            "help": "tokens of your files the student reads: the messages that carry the "
            "question's words, and their neighbours (0: the passages whole)",
            "min": 0,
            "max": 100_000,
        },
    )
    abstain: bool = field(
        default=True,
        metadata={
            "help": 'reply "Your files do not say." when the passages read do not bear the '
            "student's answer out, or the student was guessing at part of it (the answer "
            "is shown once checked, not streamed)"
        },
    )


@dataclass(frozen=True)
class Settings:
    student: StudentSettings = field(default_factory=StudentSettings)
    teacher: TeacherSettings = field(default_factory=TeacherSettings)
    pipeline: PipelineSettings = field(default_factory=PipelineSettings)
    embedder: EmbedderSettings = field(default_factory=EmbedderSettings)
    privacy: PrivacySettings = field(default_factory=PrivacySettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    files: FilesSettings = field(default_factory=FilesSettings)
    sources: Mapping[str, Source] = field(default_factory=dict, compare=False)
    config_file: Path | None = field(default=None, compare=False)

    def get(self, key: str) -> Any:
        section, name = key.split(".", 1)
        return getattr(getattr(self, section), name)

    def with_flags(self, flags: Mapping[str, Any]) -> Settings:
        """A copy with ``{"section.name": value}`` overrides, marked as coming from flags."""
        return _build(self, flags, "flag")


@dataclass(frozen=True)
class KeySpec:
    key: str
    type: Any
    default: Any
    help: str
    min: float | None
    max: float | None
    # A text key's own rule: (value, where) -> the value, or a ConfigError.
    check: Callable[[str, str], str] | None = None

    @property
    def env(self) -> str:
        return "DRAG_" + self.key.replace(".", "_").upper()

    @property
    def choices(self) -> tuple[str, ...] | None:
        return get_args(self.type) if get_origin(self.type) is Literal else None


def _section_classes() -> dict[str, type]:
    hints = get_type_hints(Settings)
    return {f.name: hints[f.name] for f in dataclasses.fields(Settings) if f.name in _SECTIONS}


_SECTIONS = ("student", "teacher", "pipeline", "privacy", "embedder", "store", "files")


def schema() -> list[KeySpec]:
    """Every setting, in display order."""
    specs = []
    for section, cls in _section_classes().items():
        hints = get_type_hints(cls)
        for f in dataclasses.fields(cls):
            meta = f.metadata
            specs.append(
                KeySpec(
                    key=f"{section}.{f.name}",
                    type=hints[f.name],
                    default=f.default,
                    help=str(meta.get("help", "")),
                    min=meta.get("min"),
                    max=meta.get("max"),
                    check=meta.get("check"),
                )
            )
    return specs


SCHEMA: dict[str, KeySpec] = {s.key: s for s in schema()}


def coerce(spec: KeySpec, value: Any, origin: str) -> Any:
    """Turn a raw value (TOML value, env string, flag) into the key's type, or fail clearly."""
    where = f"{spec.key} ({origin})"
    choices = spec.choices
    try:
        if choices is not None:
            text = str(value).strip()
            if text not in choices:
                raise ConfigError(f"{where}: {value!r} is not one of {', '.join(choices)}")
            return text
        if get_origin(spec.type) is tuple:
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
                raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
            return tuple(i.strip() for i in items if i.strip())
        if spec.type is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in {"1", "true", "yes", "on"}:
                return True
            if text in {"0", "false", "no", "off"}:
                return False
            raise ConfigError(f"{where}: {value!r} is not true or false")
        if spec.type is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number: float = int(str(value).strip()) if isinstance(value, str) else int(value)
        elif spec.type is float:
            if isinstance(value, bool):
                raise ValueError
            number = float(value)
            if not math.isfinite(number):  # "nan", "inf": no setting means either
                raise ValueError
        else:
            if not isinstance(value, str):
                raise ConfigError(f"{where}: expected text, got {value!r}")
            return spec.check(value.strip(), where) if spec.check else value.strip()
    except (TypeError, ValueError):
        kind = "a whole number" if spec.type is int else "a number"
        raise ConfigError(f"{where}: {value!r} is not {kind}") from None
    if spec.min is not None and number < spec.min:
        raise ConfigError(f"{where}: {number} is below the minimum {spec.min:g}")
    if spec.max is not None and number > spec.max:
        raise ConfigError(f"{where}: {number} is above the maximum {spec.max:g}")
    return number


def _build(base: Settings, values: Mapping[str, Any], source: Source) -> Settings:
    sections: dict[str, dict[str, Any]] = {}
    sources = dict(base.sources)
    for key, raw in values.items():
        if raw is None:
            continue
        spec = SCHEMA.get(key)
        if spec is None:
            raise ConfigError(f"unknown setting {key!r} ({source}); `drag config show` lists them")
        try:
            value = coerce(spec, raw, source)
        except ConfigError as exc:  # a flag's value is what the user just typed: bad input
            if source == "flag":
                raise FlagError(str(exc)) from None
            raise
        sections.setdefault(key.split(".")[0], {})[key.split(".")[1]] = value
        sources[key] = source
    changes: dict[str, Any] = {
        name: dataclasses.replace(getattr(base, name), **fields)
        for name, fields in sections.items()
    }
    return dataclasses.replace(base, sources=sources, **changes)


_CONFIG_LIMIT = 1024 * 1024  # bytes: a settings file is a few hundred


def _read_file(path: Path) -> dict[str, Any]:
    try:
        if path.exists() and not path.is_file():  # a FIFO, a device: never waited on
            raise ConfigError(f"config file {path} is not a regular file")
        with path.open("rb") as handle:
            raw = handle.read(_CONFIG_LIMIT + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if len(raw) > _CONFIG_LIMIT:
        raise ConfigError(
            f"config file {path} is over {_CONFIG_LIMIT // 1024} KB: not a settings file"
        )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    flat: dict[str, Any] = {}
    for section, table in data.items():
        if not isinstance(table, dict):  # "k = 3", "pipeline = 3": a value, not a table
            where = "a section, not a value" if section in _SECTIONS else "outside any section"
            raise ConfigError(
                f"config file {path}: {section} is {where}: settings go under their "
                "[section] (drag config show lists them)"
            )
        if section not in _SECTIONS:
            raise ConfigError(
                f"config file {path}: unknown section [{section}]; "
                f"sections are {', '.join(_SECTIONS)}"
            )
        for name, value in table.items():
            flat[f"{section}.{name}"] = value
    return flat


def load(
    flags: Mapping[str, Any] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    config_file: Path | None = None,
) -> Settings:
    """Effective settings: defaults, then the file, then the environment, then flags."""
    env = os.environ if env is None else env
    path = config_file or paths.config_file()
    settings = Settings(sources=dict.fromkeys(SCHEMA, "default"), config_file=path)
    settings = _build(settings, _read_file(path), "file")
    from_env = {spec.key: env[spec.env] for spec in SCHEMA.values() if spec.env in env}
    settings = _build(settings, from_env, "env")
    return _build(settings, dict(flags or {}), "flag")


def effective(settings: Settings) -> list[dict[str, Any]]:
    """Rows for ``drag config show``: key, value, source, env var, help."""
    return [
        {
            "key": spec.key,
            "value": settings.get(spec.key),
            "source": settings.sources.get(spec.key, "default"),
            "env": spec.env,
            "help": spec.help,
        }
        for spec in SCHEMA.values()
    ]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)  # a TOML basic string


def save(changes: Mapping[str, Any], path: Path | None = None) -> Path:
    """Validate ``{"section.name": value}`` and write them into the config file.

    Keys already in the file are kept; comments are not (the file is rewritten).
    The file is written owner-only and atomically.  Secrets are never settings,
    so none can end up here.
    """
    target = path or paths.config_file()
    current = _read_file(target)
    unknown = sorted(k for k in current if k not in SCHEMA)
    if unknown:  # the file is rewritten: a setting misspelt there would be lost unsaid
        raise ConfigError(
            f"config file {target}: unknown setting {unknown[0]!r} (misspelt?): mend it "
            "in an editor; `drag config show` lists the settings"
        )
    for key, raw in changes.items():
        spec = SCHEMA.get(key)
        if spec is None:
            raise ConfigError(f"unknown setting {key!r}; `drag config show` lists them")
        current[key] = coerce(spec, raw, "new value")
    lines = ["# drag-assistant settings (`drag config show` explains each key)"]
    for section in _SECTIONS:
        keys = [k for k in SCHEMA if k.startswith(section + ".") and k in current]
        if keys:
            lines += ["", f"[{section}]"]
            lines += [f"{k.split('.', 1)[1]} = {_toml_value(current[k])}" for k in keys]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # what we write must read back
    paths.private_dir(target.parent)
    tmp = target.with_name(target.name + ".tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    tmp.replace(target)
    return target
