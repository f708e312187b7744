"""The `drag` command line: a thin skin over assistant.pipeline.

Errors the user can fix print one line (``drag: error: ...``) and exit
non-zero; nothing the user typed is lost (see assistant.drafts).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from assistant import config as config_mod
from assistant import drafts, errors, modelfiles, paths, safetext
from assistant.config import MODES, Settings

if TYPE_CHECKING:
    from assistant.privacy.sanitize import Sanitized

_STDIN_LIMIT = 4 * 1024 * 1024  # more than any question; stops a runaway pipe


# Everything this CLI prints goes through these: what a model, the user or the database
# wrote is shown as text, never run by the terminal (assistant.safetext).
def echo(message: Any = None, **kwargs: Any) -> None:
    click.echo(None if message is None else safetext.plain(str(message)), **kwargs)


def secho(message: Any = None, **kwargs: Any) -> None:
    click.secho(None if message is None else safetext.plain(str(message)), **kwargs)


def to_json(value: Any) -> str:
    """JSON for --json: readable Unicode, but C1 controls and bidi overrides escaped."""
    return safetext.escape_controls(json.dumps(value, ensure_ascii=False, indent=2))


def _status_printer(enabled: bool) -> Callable[[str], None]:
    def show(message: str) -> None:
        if enabled:
            secho(message, err=True, dim=True)

    return show


def _interactive_stderr() -> bool:
    return sys.stderr.isatty()


def _settings(ctx: click.Context, flags: dict[str, Any]) -> Settings:
    base: Settings = ctx.obj["settings"]
    return base.with_flags({k: v for k, v in flags.items() if v is not None})


def read_stdin_question() -> str:
    """The question piped on standard input, decoded strictly as UTF-8."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise errors.InputError(
            'no question: give it as an argument (drag ask "...") or on standard input'
        )
    raw = stream.buffer.read(_STDIN_LIMIT + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = errors.InputError(
            f"standard input is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        )
        try:
            kept = drafts.keep(raw, str(error))
        except (errors.DragError, OSError) as why:
            raise errors.InputError(f"{error}; it could not be kept: {why}") from None
        raise errors.InputError(
            f"{error}; your input is kept in drag drafts as {kept.stem}"
        ) from None


def side_by_side(left: str, right: str, width: int) -> list[str]:
    """Two texts in columns, wrapped to fit ``width``."""
    import textwrap

    col = max(20, (width - 3) // 2)
    a = [ln for para in left.splitlines() for ln in (textwrap.wrap(para, col) or [""])]
    b = [ln for para in right.splitlines() for ln in (textwrap.wrap(para, col) or [""])]
    rows = max(len(a), len(b))
    a += [""] * (rows - len(a))
    b += [""] * (rows - len(b))
    return [f"{x:<{col}} │ {y}" for x, y in zip(a, b, strict=True)]


def review_in_terminal(sanitized: Sanitized) -> bool:
    """Show what would be sent next to the original; ask before sending."""
    import shutil

    width = min(shutil.get_terminal_size((100, 20)).columns, 160)
    echo("", err=True)
    for line in side_by_side("YOUR QUESTION (stays here)", "SENT TO THE TEACHER", width):
        secho(line, err=True, bold=True)
    for line in side_by_side(sanitized.original, sanitized.text, width):
        echo(line, err=True)
    counts = ", ".join(f"{k} ×{v}" for k, v in sorted(sanitized.counts.items())) or "nothing"
    rewrite = (
        "the student's rewrite is used"
        if sanitized.rewrite_used
        else (f"rewrite not used: {sanitized.rewrite_note}" if sanitized.rewrite_note else "")
    )
    read = len(sanitized.read_values)
    by = f" · {read} found by the local model" if read else ""
    secho(f"detected: {counts}{by}" + (f" · {rewrite}" if rewrite else ""), err=True, dim=True)
    if sanitized.unread:
        secho(f"{sanitized.unread_line}: read the right side yourself", err=True, fg="yellow")
    return click.confirm("Send the sanitized question to the teacher?", default=False, err=True)


def _review_options(review: bool, yes: bool) -> dict[str, Any]:
    """What pipeline.ask needs for the review step, given the flags and the terminal."""
    policy = "never" if yes else ("always" if review else None)
    can_ask = sys.stdin is not None and sys.stdin.isatty() and sys.stderr.isatty()
    return {"review": review_in_terminal if can_ask else None, "review_policy": policy}


def _kept(question: str, exc: errors.DragError | KeyboardInterrupt) -> errors.DragError:
    return drafts.kept_error(question, exc)


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config", "config_path", type=click.Path(dir_okay=False), help="Config file to use."
)
@click.version_option(package_name="drag-assistant", prog_name="drag")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None) -> None:
    """drag: a private assistant. A small local model answers; a large teacher
    only ever sees the question, and gives evidence and a knowledge graph."""

    ctx.ensure_object(dict)
    ctx.obj["settings"] = config_mod.load(config_file=Path(config_path) if config_path else None)
    if ctx.invoked_subcommand is None:
        ctx.invoke(chat)


_mode_option = click.option("--mode", type=click.Choice(MODES), help="Context for the student.")
_k_option = click.option("--k", type=int, help="Top evidence/triples given to the student.")
_n_option = click.option("--n", type=int, help="Evidence statements asked of the teacher.")
_model_options = [
    click.option("--student", "student_model", help="Student: manifest name or .gguf path."),
    click.option("--teacher", "teacher_endpoint", help='Teacher: "local" or a base URL.'),
    click.option("--teacher-model", help="Model name at the teacher endpoint."),
]
_cache_options = [
    click.option(
        "--offline",
        is_flag=True,
        default=None,
        help="Never contact the teacher: answer from the local cache or say it cannot.",
    ),
    click.option(
        "--no-cache",
        "no_cache",
        is_flag=True,
        default=None,
        help="Do not answer from the cache (what the teacher says is still cached).",
    ),
]


def _with_model_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_model_options):
        f = option(f)
    return f


def _with_cache_options(f: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_cache_options):
        f = option(f)
    return f


def _flags(**kw: Any) -> dict[str, Any]:
    names = {
        "mode": "pipeline.mode",
        "k": "pipeline.k",
        "n": "pipeline.n",
        "student_model": "student.model",
        "teacher_endpoint": "teacher.endpoint",
        "teacher_model": "teacher.model",
        "offline": "store.offline",
    }
    flags = {names[k]: v for k, v in kw.items() if k in names}
    if kw.get("no_cache"):
        flags["store.cache"] = False
    return flags


def _source_line(result: Any) -> str:
    """Where the student's context came from, with provenance."""
    p = result.provenance
    uploads = ", ".join(f"#{u}" for u in p.get("uploads") or []) or "none recorded"
    if result.source == "cache":
        how = p.get("how", "")
        detail = f"{how}, score {p.get('score', 0):.2f}"
        return f"Context: from the local cache ({detail}; from uploads {uploads}); nothing sent"
    if result.source == "teacher":
        return f"Context: from the teacher now (ledger uploads {uploads})"
    return "Context: none (the student alone); nothing sent"


def _format_result(result: Any, streamed: bool) -> str:
    lines = [] if streamed else [result.answer]
    used_e, used_t = result.used_evidence, result.used_triples
    if used_e:
        lines += [
            "",
            f"Evidence (top {len(used_e)} of {len(result.evidence)}; "
            "fused score, cosine, teacher rank):",
        ]
        lines += [
            f"{e.rank:>3}. [{e.score:.4f} cos {e.similarity:+.2f} t#{e.teacher_rank}] {e.text}"
            for e in used_e
        ]
    if used_t:
        lines += ["", f"Triples (top {len(used_t)} of {len(result.triples)}; fused score, cosine):"]
        lines += [
            f"{t.rank:>3}. [{t.score:.4f} cos {t.similarity:+.2f}] "
            f"({t.entity1}; {t.entity2}) {t.relation}"
            for t in used_t
        ]
    if result.privacy:
        counts = result.privacy.get("entities") or {}
        detected = ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items())) or "no personal data"
        what = "Sent to the teacher" if result.source == "teacher" else "Sanitized (not sent)"
        lines += ["", f"{what} ({detected} detected): {result.privacy['sent_question']}"]
    lines += ["", _source_line(result)]
    lines += [f"warning: {w}" for w in result.warnings]
    s, te, tm = result.student, result.teacher, result.timings
    summary = []
    if te:
        summary.append(
            f"teacher: {len(te['calls'])} calls, "
            f"{te['prompt_tokens']}+{te['completion_tokens']} tokens"
        )
    summary.append(
        f"student: {s['completion_tokens']} tokens at {s['tokens_per_second']:.1f} tok/s"
        f" ({'GPU' if s['gpu_offload'] else 'CPU'})"
    )
    summary.append(f"{tm.get('total', 0):.1f} s")
    lines += ["", " · ".join(summary)]
    return "\n".join(lines)


@cli.command()
@click.argument("question", nargs=-1)
@_mode_option
@_k_option
@_n_option
@_with_model_options
@_with_cache_options
@click.option("--review", is_flag=True, help="Show what would be sent and ask first.")
@click.option("--yes", "-y", is_flag=True, help="Send without the review step.")
@click.option("--json", "as_json", is_flag=True, help="Print the whole record as JSON.")
@click.pass_context
def ask(
    ctx: click.Context,
    /,
    question: tuple[str, ...],
    as_json: bool,
    review: bool,
    yes: bool,
    **kw: Any,
) -> None:
    """Ask one QUESTION (or read it from standard input; "-" forces that)."""
    from assistant import pipeline
    from assistant.runtime import Runtime

    settings = _settings(ctx, _flags(**kw))
    text = read_stdin_question() if not question or question == ("-",) else " ".join(question)
    stream = not as_json and sys.stdout.isatty()
    try:
        with Runtime(settings, status=_status_printer(_interactive_stderr())) as rt:
            on_text = (lambda piece: echo(piece, nl=False)) if stream else None
            result = pipeline.ask(
                rt,
                text,
                on_text=on_text,
                progress=_end_streamed_line if stream else None,
                **_review_options(review, yes),
            )
    except (errors.DragError, KeyboardInterrupt) as exc:
        raise _kept(text, exc) from None
    if as_json:
        echo(to_json(result.to_dict()))
    else:
        echo(_format_result(result, streamed=stream))


def _end_streamed_line(stage: str, _result: Any) -> None:
    """The streamed answer's line ends as soon as it is written, before any status line
    about what follows (the graph built for the cache after the answer)."""
    if stage == "answered":
        echo()


@cli.command()
@_mode_option
@_k_option
@_n_option
@_with_model_options
@_with_cache_options
@click.option("--plain", is_flag=True, help="A line-by-line chat instead of the app.")
@click.pass_context
def chat(ctx: click.Context, /, plain: bool = False, **kw: Any) -> None:
    """The app (in a terminal), or questions line by line (--plain, or input piped)."""
    from assistant import pipeline
    from assistant.runtime import Runtime

    settings = _settings(ctx, _flags(**kw))
    interactive = sys.stdin is not None and sys.stdin.isatty()
    if interactive and sys.stdout.isatty() and not plain:
        from assistant.tui.app import run

        run(settings)
        return
    status = _status_printer(True)
    with Runtime(settings, status=status) as rt:
        if interactive:
            secho(
                f"drag · student {settings.student.model} · teacher {settings.teacher.endpoint}"
                f" · mode {settings.pipeline.mode}. Ask a question; Ctrl+D quits.",
                bold=True,
            )
        while True:
            try:
                line = input("› " if interactive else "")
            except EOFError:
                break
            if not line.strip():
                continue
            try:
                result = pipeline.ask(
                    rt,
                    line,
                    on_text=lambda piece: echo(piece, nl=False),
                    progress=_end_streamed_line,
                    **_review_options(False, False),
                )
                echo(_format_result(result, streamed=True))
            except (errors.DragError, KeyboardInterrupt) as exc:
                echo()
                secho(f"drag: error: {_kept(line, exc)}", err=True, fg="red")


@cli.group("config")
def config_group() -> None:
    """Show settings and where each came from."""


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def config_show(ctx: click.Context, as_json: bool) -> None:
    """Effective settings, with their source: flag, env, file or default."""
    settings: Settings = ctx.obj["settings"]
    rows = config_mod.effective(settings)
    if as_json:
        echo(json.dumps({"config_file": str(settings.config_file), "settings": rows}, indent=2))
        return
    echo(
        f"# config file: {settings.config_file}"
        f"{'' if settings.config_file and settings.config_file.exists() else ' (not present)'}"
    )
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        echo(f"{r['key']:<{width}} = {json.dumps(r['value']):<32} # {r['source']:<7} {r['env']}")


@config_group.command("path")
def config_path_cmd() -> None:
    """Where the config file, data and cache live."""
    for name, value in (
        ("config", paths.config_file()),
        ("data", paths.data_dir()),
        ("cache", paths.cache_dir()),
        ("state", paths.state_dir()),
    ):
        echo(f"{name:<6} {value}")


# A negative VALUE ("-1") is a value, not an option.
@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str) -> None:
    """Write KEY = VALUE into the config file (validated; lists comma-separated)."""
    settings: Settings = ctx.obj["settings"]
    path = config_mod.save({key: value}, settings.config_file)
    echo(f"{key} = {json.dumps(config_mod.load(config_file=path).get(key))} in {path}")


@config_group.command("set-key")
def config_set_key() -> None:
    """Store the teacher API key in the system keyring (read without echo)."""
    from assistant import secrets

    key = click.prompt("Teacher API key", hide_input=True, err=True)
    secrets.store_api_key(key)
    echo("stored in the system keyring (it is never written to the config file)")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@_with_model_options
@click.pass_context
def doctor(ctx: click.Context, /, as_json: bool, **kw: Any) -> None:
    """Check each part (model file, GPU, embedder, teacher) and print fixes."""
    from dataclasses import asdict

    from assistant.doctor import checks
    from assistant.runtime import Runtime

    settings = _settings(ctx, _flags(**kw))
    results = []
    with Runtime(settings, status=_status_printer(_interactive_stderr() and not as_json)) as rt:
        for check in checks(rt):
            results.append(check)
            if not as_json:
                mark = (
                    click.style("ok  ", fg="green") if check.ok else click.style("FAIL", fg="red")
                )
                echo(f"{mark} {check.name}: {check.detail}")
                if not check.ok and check.fix:
                    echo(f"     fix: {check.fix}")
    if as_json:
        echo(json.dumps([asdict(c) for c in results], indent=2))
    if not all(c.ok for c in results):
        ctx.exit(1)


@cli.group("teacher")
def teacher_group() -> None:
    """The embedded local teacher (llama.cpp server on 127.0.0.1)."""


@teacher_group.command("serve")
@click.option("--port", type=int, default=0, help="Port on 127.0.0.1 (default: a free one).")
@click.option("--model", "model", help="Manifest name or .gguf path (default: teacher.model).")
@click.pass_context
def teacher_serve(ctx: click.Context, port: int, model: str | None) -> None:
    """Run the local teacher until Ctrl+C; other drag commands reuse it."""
    from assistant import localserver

    settings: Settings = ctx.obj["settings"]
    name = model or settings.teacher.model or settings.student.model
    path, _spec = modelfiles.resolve(name, _status_printer(True))
    server = localserver.LocalServer(path, n_ctx=settings.teacher.n_ctx, port=port)
    # Ctrl+C, `kill` and a background job's SIGINT (started with SIGINT ignored, as a
    # shell without job control does) all stop the llama.cpp child and the record.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if not port and _serve_running(path, settings.teacher.n_ctx):
        return
    echo(f"starting {path.name} on 127.0.0.1:{server.port}…", err=True)
    recorded = False
    try:
        server.start()
        server.record()
        recorded = True
        echo(
            f"local teacher ready at {server.base_url} (model alias {localserver.ALIAS}; "
            f"its API key is in {localserver.state_file()}, readable by you only); "
            "Ctrl+C stops it"
        )
        assert server.process is not None
        code = server.process.wait()
        # It ended by itself: the commands that used it are told how, and so is this one.
        log = server.write_exit(localserver.exit_file(localserver.state_file()))
        raise errors.TeacherError(localserver.crash_line(code, log))
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if recorded:
            server.forget()


def _serve_running(path: Path, n_ctx: int) -> bool:
    """What ``drag teacher serve`` does when a local teacher for ``path`` already runs:
    another serve is told of and left; the shared server that other drag commands
    started is held until Ctrl+C (as a server of serve's own would be).  False: none runs."""
    from assistant import localserver

    existing = localserver.running(path)
    if existing is not None:
        echo(
            f"a local teacher for {path.name} already runs at {existing.base_url} "
            f"(drag teacher serve, pid {existing.pid}); nothing started"
        )
        return True
    with localserver.holding_shared(path, n_ctx=n_ctx) as shared:
        if shared is None:
            return False
        echo(
            f"local teacher ready at {shared.base_url} (model alias {localserver.ALIAS}; "
            "the server other drag commands started, held while this runs); Ctrl+C lets it go"
        )
        try:
            while localserver.alive(shared.pid):
                time.sleep(1.0)
        except KeyboardInterrupt:
            return True
    raise errors.TeacherError(f"the shared local teacher (pid {shared.pid}) stopped")


@cli.group("bench")
def bench_group() -> None:
    """Benchmarks that print figures: privacy, accuracy, the pipeline, the store, start-up."""


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@bench_group.command("privacy", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_privacy(ctx: click.Context) -> None:
    """What leaves the machine: leakage per entity type, with baselines (--help for options)."""
    from assistant.bench import leakage

    ctx.exit(leakage.main(list(ctx.args)))


@bench_group.command("accuracy", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_accuracy(ctx: click.Context) -> None:
    """The DRAG effect: student alone vs evidence, graph, both, by K (--help for options)."""
    from assistant.bench import accuracy

    ctx.exit(accuracy.main(list(ctx.args)))


@bench_group.command("speed", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_speed(ctx: click.Context) -> None:
    """Students side by side: load, prefill, first token, decode (--help for options)."""
    from assistant.bench import speed

    ctx.exit(speed.main(list(ctx.args)))


@bench_group.command("builds", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_builds(ctx: click.Context) -> None:
    """llama.cpp builds side by side (each venv's own): prefill and decode (--help)."""
    from assistant.bench import builds

    ctx.exit(builds.main(list(ctx.args)))


@bench_group.command("embedder", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_embedder(ctx: click.Context) -> None:
    """The embedder on ONNX Runtime and on torch, side by side: speed and agreement."""
    from assistant.bench import embedding

    ctx.exit(embedding.main(list(ctx.args)))


@bench_group.command("startup", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_startup(ctx: click.Context) -> None:
    """How soon the app shows its first screen, in tmux, against a bare Textual app."""
    from assistant.bench import startup

    ctx.exit(startup.main(list(ctx.args)))


def _open_store(ctx: click.Context) -> Any:
    from assistant.store import Store

    s: Settings = ctx.obj["settings"]
    return Store.configured(s.store.database, s.store.key)


def parse_since(text: str) -> Any:
    """``30d``, ``12h``, ``2w``, ``45m`` ago, or an ISO date/time (UTC unless given)."""
    import datetime as dt
    import re

    now = dt.datetime.now(dt.UTC)
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text)
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now - dt.timedelta(**{unit: int(m.group(1))})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise errors.InputError(
            f"{text!r} is not a time: use 30d, 12h, 2w, 45m or a date like 2026-11-01"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


@cli.group("audit")
def audit_group() -> None:
    """The upload ledger: every request that left this machine, byte for byte."""


def _redaction_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}×{v}" for k, v in sorted(counts.items())) or "-"


@audit_group.command("list")
@click.option("--since", help="Only uploads after this (30d, 12h, 2026-11-01).")
@click.option("--search", help="Only uploads whose request or reply contains TEXT.")
@click.option("--limit", type=click.IntRange(min=1), help="The last N only.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def audit_list(
    ctx: click.Context, since: str | None, search: str | None, limit: int | None, as_json: bool
) -> None:
    """Uploads, oldest first: time, teacher model, purpose, bytes, what was redacted."""
    from assistant.store import ledger

    when = parse_since(since) if since else None
    with _open_store(ctx) as store:
        rows = [
            ledger.summary(r)
            for r in ledger.select(store.db, since=when, search=search, limit=limit)
        ]
    if as_json:
        echo(to_json(rows))
        return
    if not rows:
        echo("no uploads recorded" + (" that match" if since or search else ""))
        return
    echo(f"{'id':>5}  {'time (UTC)':<19}  {'model':<20} {'purpose':<9} {'bytes':>7}  redacted")
    for r in rows:
        size = "deleted" if r["deleted"] else f"{r['bytes']:,}"
        status = "" if r["status"] == "ok" else f"  [{r['status']}]"
        echo(
            f"{r['id']:>5}  {r['created'][:19].replace('T', ' '):<19}  {r['model'][:20]:<20} "
            f"{r['purpose']:<9} {size:>7}  {_redaction_text(r['redaction'])}{status}"
        )


@audit_group.command("show")
@click.argument("upload_id", type=int)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def audit_show(ctx: click.Context, upload_id: int, as_json: bool) -> None:
    """One upload: the exact bytes sent and the raw reply."""
    from assistant.store import cache, ledger

    with _open_store(ctx) as store:
        row = ledger.get(store.db, upload_id)
        derived = cache.derived_from(store.db, upload_id)
    if row is None:
        raise errors.InputError(f"no upload #{upload_id}; `drag audit list` shows them")
    d = {**ledger.detail(row), "cached": derived}
    if as_json:
        echo(to_json(d))
        return
    for key in (
        "id",
        "created",
        "endpoint",
        "model",
        "purpose",
        "prompt_version",
        "status",
        "error",
        "attempts",
        "prompt_tokens",
        "completion_tokens",
        "seconds",
        "deleted",
        "hash",
    ):
        if d.get(key) is not None:
            echo(f"{key:<17} {d[key]}")
    echo(f"{'redacted':<17} {_redaction_text(d['redaction'])}")
    for item in derived:
        echo(
            f"{'cached as':<17} entry {item['entry_id']}: {item['evidence']} evidence, "
            f"{item['triples']} triples for {errors.one_line(item['question'], 60)!r}"
        )
    if d["deleted"]:
        echo("\n(request and reply removed; the row stays so the chain verifies)")
        return
    echo(f"\n--- request: the exact {d['bytes']:,} bytes sent ---")
    echo(d["request"])
    echo("--- reply ---")
    echo(d["reply"] if d["reply"] is not None else "(no reply)")


@audit_group.command("verify")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--head",
    "noted",
    metavar="ID:HASH",
    help="A head noted earlier (`drag audit head`): the ledger must still reach it.",
)
@click.pass_context
def audit_verify(ctx: click.Context, as_json: bool, noted: str | None) -> None:
    """Recompute the hash chain and each row's MAC (the store key); name the first row
    that does not match (exit 1)."""
    with _open_store(ctx) as store:
        verdict = store.verify_ledger(noted)
    if as_json:
        echo(json.dumps(verdict.to_dict(), indent=2))
    elif verdict.ok:
        echo(
            f"ledger ok: {verdict.rows} uploads, chain and MACs intact"
            + (f" ({verdict.tombstones} with payload removed)" if verdict.tombstones else "")
        )
    else:
        where = f" at upload #{verdict.bad_id}" if verdict.bad_id else ""
        secho(f"ledger BROKEN{where}: {verdict.reason} (checked {verdict.rows} rows)", fg="red")
    if not verdict.ok:
        ctx.exit(1)


@audit_group.command("head")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def audit_head(ctx: click.Context, as_json: bool) -> None:
    """The newest upload's id and hash: note it elsewhere; `drag audit verify --head
    ID:HASH` later shows whether rows were removed since."""
    from assistant.store import ledger

    with _open_store(ctx) as store:
        verdict = store.verify_ledger()
        top = ledger.head(store.db)
    if as_json:
        echo(json.dumps({**top, "verified": verdict.ok}, indent=2))
    else:
        echo(f"{top['id']}:{top['hash']}")
    if not verdict.ok:
        secho(f"warning: the ledger does not verify: {verdict.reason}", err=True, fg="red")
        ctx.exit(1)


@audit_group.command("export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "md"]), default="jsonl")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="File (default: stdout).")
@click.option("--since", help="Only uploads after this (30d, 12h, 2026-11-01).")
@click.pass_context
def audit_export(ctx: click.Context, fmt: str, output: str | None, since: str | None) -> None:
    """Every upload with its payload, as JSON lines or Markdown."""
    from assistant.store import ledger

    when = parse_since(since) if since else None
    with _open_store(ctx) as store:
        rows = [ledger.detail(r) for r in ledger.select(store.db, since=when)]
        verdict = store.verify_ledger()
    if fmt == "jsonl":
        text = ledger.jsonl(rows)
    else:
        parts = [
            "# drag-assistant upload ledger",
            "",
            f"{len(rows)} uploads · chain "
            + ("verified" if verdict.ok else f"BROKEN at #{verdict.bad_id}: {verdict.reason}"),
        ]
        for r in rows:
            parts += [
                "",
                f"## Upload {r['id']} · {r['created']} · {r['purpose']} · {r['model']}",
                "",
                f"- endpoint: {r['endpoint']}",
                f"- redacted: {_redaction_text(r['redaction'])}",
                f"- tokens: {r['prompt_tokens']} + {r['completion_tokens']}; "
                f"{r['seconds']} s; status {r['status']}",
                f"- hash: `{r['hash']}`",
            ]
            if r["deleted"]:
                parts += ["", f"_payload removed {r['deleted']}_"]
            else:
                parts += [
                    "",
                    "Request (exact bytes):",
                    "",
                    "```json",
                    r["request"] or "",
                    "```",
                    "",
                    "Reply:",
                    "",
                    "```",
                    r["reply"] or "",
                    "```",
                ]
        text = safetext.plain("\n".join(parts) + "\n")
    if output:
        from pathlib import Path

        paths.write_private(Path(output), text)
        echo(f"wrote {len(rows)} uploads to {output}", err=True)
    else:
        echo(text, nl=False)


@audit_group.command("rm")
@click.option("--older-than", "older_than", required=True, help="Age: 30d, 12h, 2w.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@click.pass_context
def audit_rm(ctx: click.Context, older_than: str, yes: bool) -> None:
    """Remove the payloads of old uploads; the rows stay (tombstones) so the chain verifies."""
    import re

    if not re.fullmatch(r"\s*\d+\s*[mhdw]\s*", older_than):
        raise errors.InputError(f"--older-than {older_than!r}: use an age like 30d, 12h or 2w")
    cutoff = parse_since(older_than)
    from assistant.store import ledger

    with _open_store(ctx) as store:
        count = len(
            [
                r
                for r in ledger.select(store.db)
                if r["deleted"] is None and r["created"] < cutoff.isoformat(timespec="microseconds")
            ]
        )
        if (
            count
            and not yes
            and not click.confirm(
                f"Remove the request and reply of {count} uploads?", default=False, err=True
            )
        ):
            raise click.exceptions.Abort()
        removed = store.remove_payloads(cutoff)
    echo(f"removed the payloads of {removed} uploads; the ledger still verifies")


@cli.group("drafts")
def drafts_group() -> None:
    """Questions that were not answered (blocked, declined, failed), kept sealed."""


@drafts_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def drafts_list(as_json: bool) -> None:
    """Each kept question: its name, when, and why it was not answered."""
    rows = drafts.listing()
    if as_json:
        echo(to_json(rows))
        return
    if not rows:
        echo("no kept questions")
    for r in rows:
        question = safetext.one_line(r.get("question") or "")
        echo(f"{r['name']}  {r.get('created', '')}  {question[:60]}")
        echo(f"    {safetext.one_line(r.get('error') or '')[:100]}")


@drafts_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def drafts_show(name: str, as_json: bool) -> None:
    """One kept question in full (the question, the error, any teacher reply)."""
    r = drafts.read(name)
    if as_json:
        echo(to_json(r))
        return
    echo(r.get("question") or "")
    echo(f"\n--- not answered: {r.get('error') or ''}")
    if r.get("teacher_reply"):
        echo(f"--- the teacher had replied ---\n{r['teacher_reply']}")


@drafts_group.command("rm")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Remove every kept question.")
def drafts_rm(names: tuple[str, ...], everything: bool) -> None:
    """Remove kept questions."""
    if everything:
        names = tuple(r["name"] for r in drafts.listing())
    elif not names:
        raise errors.InputError("name the kept questions to remove, or give --all")
    for name in names:
        drafts.remove(name)
    echo(f"removed {len(names)} kept questions")


@cli.group("cache")
def cache_group() -> None:
    """The local cache of the teacher's evidence and knowledge graph."""


@cache_group.command("stats")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def cache_stats(ctx: click.Context, as_json: bool) -> None:
    """What the cache holds, per teacher model and prompt version."""
    from assistant.store import cache

    with _open_store(ctx) as store:
        stats = cache.stats(store.db)
        stats["database"] = str(store.path)
        stats["database_bytes"] = store.path.stat().st_size
    if as_json:
        echo(json.dumps(stats, indent=2))
        return
    echo(
        f"{stats['questions']} questions · {stats['evidence']} evidence · "
        f"{stats['entities']} entities · {stats['triples']} triples · "
        f"{stats['bytes_per_question']:,} bytes per question · database "
        f"{stats['database_bytes'] / 1e6:.1f} MB ({stats['database']})"
    )
    for sp in stats["spaces"]:
        versions = ", ".join(f"{k} {v}" for k, v in sp["prompt_versions"].items())
        echo(f"  {sp['teacher_model']}: {sp['questions']} questions ({versions})")


@cache_group.command("purge")
@click.option("--model", help="Only what this teacher model said (as `cache stats` names it).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask.")
@click.pass_context
def cache_purge(ctx: click.Context, model: str | None, yes: bool) -> None:
    """Delete cached evidence and triples (the upload ledger is kept)."""
    from assistant.store import cache

    what = f"everything teacher {model} said" if model else "the whole cache"
    if not yes and not click.confirm(f"Delete {what}?", default=False, err=True):
        raise click.exceptions.Abort()
    with _open_store(ctx) as store:
        removed = cache.purge(store.db, model)
    echo(f"removed {removed} cached questions")


@bench_group.command("store", context_settings=_PASS_THROUGH)
@click.pass_context
def bench_store(ctx: click.Context) -> None:
    """Offline answers vs the teacher, cache hits, retrieval at scale (--help for options)."""
    from assistant.bench import offline as bench

    ctx.exit(bench.main(list(ctx.args)))


@cli.command("models")
@click.option("--json", "as_json", is_flag=True)
@click.option(
    "--drop-chunks",
    is_flag=True,
    help="join and verify each chunked model, then uninstall its chunk packages (the model "
    "is then on disk once)",
)
def models_cmd(as_json: bool, drop_chunks: bool) -> None:
    """Models in the manifest and whether each is installed."""
    if drop_chunks:
        for spec in modelfiles.load_manifest().values():
            if freed := modelfiles.drop_chunks(spec, lambda m: echo(m, err=True)):
                echo(f"{spec.name}: {freed / 1e6:.0f} MB of chunks removed", err=True)
    rows: list[dict[str, Any]] = []
    for spec in modelfiles.load_manifest().values():
        try:
            path: str | None = str(modelfiles.locate(spec))
            state = "ready"
        except errors.ModelError as exc:
            path, state = None, str(exc)
        rows.append(
            {
                "name": spec.name,
                "file": spec.file,
                "license": spec.license,
                "size": spec.size,
                "path": path,
                "state": state,
            }
        )
    if as_json:
        echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        echo(f"{r['name']:<30} {r['size'] / 1e6:>7.0f} MB  {r['license']:<10} {r['state']}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one-line errors, no tracebacks (DRAG_DEBUG=1 shows them)."""
    try:
        code = cli.main(args=argv, prog_name="drag", standalone_mode=False)
    except errors.DragError as exc:
        secho(f"drag: error: {exc}", err=True, fg="red")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        echo("drag: cancelled", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.message = safetext.one_line(exc.message)  # type: ignore[misc]
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        echo("drag: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("DRAG_DEBUG"):
            raise
        secho(
            f"drag: internal error: {type(exc).__name__}: {errors.one_line(str(exc), 200)} "
            "(run with DRAG_DEBUG=1 for the traceback)",
            err=True,
            fg="red",
        )
        sys.exit(70)
    sys.exit(code if isinstance(code, int) else 0)
