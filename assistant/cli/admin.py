"""`drag config`, `drag doctor`, `drag drafts`, `drag cache`, `drag reembed` and `drag models`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from assistant.base import config as config_mod
from assistant.base import errors, paths, safetext
from assistant.base.config import Settings
from assistant.cli.common import (
    echo,
    flags,
    interactive_stderr,
    open_store,
    secho,
    settings_of,
    status_printer,
    to_json,
    with_model_options,
)
from assistant.cli.root import cli


@cli.group("config")
def config_group() -> None:
    """Show settings and where each came from."""


def _loaded(ctx: click.Context) -> Settings:
    """The settings; where they did not load, why (only `config set` goes on: it mends)."""
    if "unloaded" in ctx.obj:
        raise ctx.obj["unloaded"][0]
    return ctx.obj["settings"]  # type: ignore[no-any-return]


@config_group.command("show")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def config_show(ctx: click.Context, as_json: bool) -> None:
    """Effective settings, with their source: flag, env, file or default."""
    settings = _loaded(ctx)
    rows = config_mod.effective(settings)
    if as_json:
        echo(to_json({"config_file": str(settings.config_file), "settings": rows}))
        return
    echo(
        f"# config file: {settings.config_file}"
        f"{'' if settings.config_file and settings.config_file.exists() else ' (not present)'}"
    )
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        line = f"{r['key']:<{width}} = {_shown(r['value']):<32} # {r['source']:<7} {r['env']}"
        echo(f"{line}: {r['help']}" if r.get("help") else line)


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


def _shown(value: Any) -> str:
    """A setting's value as JSON, its letters as written ("Zoë", not "Zo\\u00eb"), controls
    escaped."""
    return safetext.escape_controls(json.dumps(value, ensure_ascii=False))


# A negative VALUE ("-1") is a value, not an option.
@config_group.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
@click.pass_context
def config_set(ctx: click.Context, key: str, value: str) -> None:
    """Write KEY = VALUE into the config file (validated; lists comma-separated); a file
    that does not load as it is can be mended so."""
    unloaded = ctx.obj.get("unloaded")
    target = ctx.obj["settings"].config_file if unloaded is None else unloaded[1]
    if key == "privacy.categories":  # its entities are the privacy policy's: checked there
        from assistant.privacy.policy import check_categories

        check_categories(config_mod.coerce(config_mod.SCHEMA[key], value, "new value"))
    if key == "student.model":  # a name the manifest has, or a .gguf file's path
        from assistant.models import modelfiles

        known = modelfiles.load_manifest()
        path = paths.expand(value)  # a GGUF file is read whatever its name's end
        if value not in known and path.suffix.lower() != ".gguf" and not path.is_file():
            raise errors.ConfigError(
                f"student.model (new value): unknown model {value!r}: give a path to a "
                f".gguf file or one of {', '.join(known)}"
            )
    path = config_mod.save({key: value}, target)
    written = config_mod.load(env={}, config_file=path).get(key)  # the file's, not the env's
    said = f"{key} = {_shown(written)} in {path}"
    now = config_mod.load(config_file=path)
    if now.sources.get(key) == "env":  # it changes nothing while the variable is set
        spec = config_mod.SCHEMA[key]
        said += f"; {spec.env} in your environment overrides it ({_shown(now.get(key))})"
    echo(said)


@config_group.command("set-key")
def config_set_key() -> None:
    """Store the teacher API key in the system keyring (typed without echo, or piped:
    `pass show teacher | drag config set-key`)."""
    from assistant.base import secrets

    if sys.stdin is not None and not sys.stdin.isatty():  # piped: its first line
        key = sys.stdin.readline(4096).strip()  # a key is a line; a runaway pipe is not
        if not key:
            raise errors.InputError(
                "no key on standard input: type it in a terminal, or pipe it "
                "(… | drag config set-key)"
            )
    else:
        key = click.prompt("Teacher API key", hide_input=True, err=True)
    secrets.store_api_key(key)
    echo("stored in the system keyring (it is never written to the config file)")


@cli.command()
@click.option("--json", "as_json", is_flag=True)
@with_model_options
@click.pass_context
def doctor(ctx: click.Context, /, as_json: bool, **kw: Any) -> None:
    """Check each part (model file, GPU, embedder, teacher) and print fixes."""
    from dataclasses import asdict
    from itertools import chain

    from assistant.core.doctor import Check, checks
    from assistant.core.session import Session
    from assistant.serve.status import server_status, status_line

    settings = settings_of(ctx, flags(**kw))
    results = []
    with Session(settings, status=status_printer(interactive_stderr() and not as_json)) as rt:
        for check in chain(checks(rt), [Check("drag serve", True, status_line(server_status()))]):
            results.append(check)
            if not as_json:
                # Our colour on our mark only: the detail (which may quote a model or a
                # server) is plain text.
                secho("ok  " if check.ok else "FAIL", fg="green" if check.ok else "red", nl=False)
                echo(f" {check.name}: {check.detail}")
                if not check.ok and check.fix:
                    echo(f"     fix: {check.fix}")
    if as_json:
        echo(json.dumps([asdict(c) for c in results], indent=2))
    if not all(c.ok for c in results):
        ctx.exit(1)


@cli.group("drafts")
def drafts_group() -> None:
    """Questions that were not answered (blocked, declined, failed), kept sealed."""


@drafts_group.command("list")
@click.option("--json", "as_json", is_flag=True)
def drafts_list(as_json: bool) -> None:
    """Each kept question: its name, when, and why it was not answered."""
    from assistant.core import drafts

    rows = drafts.listing()
    if as_json:
        echo(to_json(rows))
        return
    if not rows:
        echo("no kept questions")
    for r in rows:
        question = errors.one_line(safetext.one_line(r.get("question") or ""), 60)
        echo(f"{r['name']}  {r.get('created', '')}  {question}")  # cut ones end in "…"
        echo(f"    {errors.one_line(safetext.one_line(r.get('error') or ''), 100)}")


@drafts_group.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def drafts_show(name: str, as_json: bool) -> None:
    """One kept question in full (the question, the error, any teacher reply)."""
    from assistant.core import drafts

    r = drafts.read(name)
    if as_json:
        echo(to_json(r))
        return
    echo(r.get("question") or "")
    if r.get("would_send"):
        echo(f"\n--- what would be sent (drag drafts release {name}) ---\n{r['would_send']}")
    echo(f"\n--- not answered: {r.get('error') or ''}")
    if r.get("teacher_reply"):
        echo(f"--- the teacher had replied ---\n{r['teacher_reply']}")


@drafts_group.command("release")
@click.argument("name")
def drafts_release(name: str) -> None:
    """Let a request that `drag serve` kept through once, when its program sends it again."""
    from assistant.core import drafts

    drafts.release(name)
    echo(
        f"{name} is released: the next time its program sends the same request, it goes "
        "with its values replaced, once"
    )


@drafts_group.command("rm")
@click.argument("names", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Remove every kept question.")
def drafts_rm(names: tuple[str, ...], everything: bool) -> None:
    """Remove kept questions."""
    from assistant.core import drafts

    if everything:
        names = tuple(r["name"] for r in drafts.listing())
    elif not names:
        raise errors.InputError("name the kept questions to remove, or give --all")
    removed = drafts.remove_all(names)  # a name given twice is removed once
    echo(f"removed {removed} kept question" + ("" if removed == 1 else "s"))


@cli.group("cache")
def cache_group() -> None:
    """The local cache of the teacher's evidence and knowledge graph."""


@cache_group.command("stats")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def cache_stats(ctx: click.Context, as_json: bool) -> None:
    """What the cache holds, per teacher model and prompt version."""
    from assistant.store import cache

    with open_store(ctx) as store:
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
    with open_store(ctx) as store:
        removed = cache.purge(store.db, model)
    echo(f"removed {removed} cached questions")


@cli.command("reembed")
@click.pass_context
def reembed_cmd(ctx: click.Context) -> None:
    """Make every embedding the store keeps (the cache's, your files' index's) again with
    the embedder the settings name: after embedder.model changed, recall by meaning and
    the files' search work again."""
    from assistant.core.session import Session

    settings: Settings = ctx.obj["settings"]

    def told(table: str, done: int, total: int) -> None:
        if interactive_stderr():
            click.echo(f"\r{table}: {done} of {total}", err=True, nl=done == total)

    with Session(settings, status=status_printer(interactive_stderr())) as rt:
        done = rt.reembed(told)
    echo(f"{done} embeddings made with {settings.embedder.model}")


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
    from assistant.models import modelfiles

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
