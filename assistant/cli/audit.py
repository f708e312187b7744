"""`drag audit …`: the upload ledger: list, show, verify, head, export, rm."""

from __future__ import annotations

import json
import re
from typing import Any

import click

from assistant.base import errors, paths, safetext
from assistant.cli.common import GivenPath, echo, open_store, secho, to_json
from assistant.cli.root import cli


def parse_since(text: str) -> Any:
    """``30d``, ``12h``, ``2w``, ``45m`` ago, or an ISO date/time (UTC unless given)."""
    import datetime as dt
    import re

    now = dt.datetime.now(dt.UTC)
    m = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", text)
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        try:
            return now - dt.timedelta(**{unit: int(m.group(1))})
        except (OverflowError, ValueError):  # past the year 1, or past timedelta's range
            raise errors.InputError(
                f"{text!r} is further back than a date can be: use fewer {unit}"
            ) from None
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise errors.InputError(
            f"{text!r} is not a time: use 30d, 12h, 2w, 45m or a date like 2026-11-01"
        ) from None
    try:  # as stored: in UTC
        return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    except OverflowError:  # 0001-01-01T00:00+05:00 is before the year 1 in UTC
        raise errors.InputError(f"{text!r} is past the calendar's first or last day") from None


def _settle(store: Any) -> None:
    """Record what a killed drag had under way; a listing works without it (a key that
    cannot be opened now, a busy database): said on standard error."""
    import sqlite3

    try:
        store.settle_uploads()
    except (errors.DragError, sqlite3.Error) as exc:
        echo(
            f"drag: warning: uploads a stopped drag left noted are not listed yet ({exc})",
            err=True,
        )


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

    when = parse_since(since) if since is not None else None
    with open_store(ctx) as store:
        _settle(store)
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
@click.argument("upload_id", type=click.IntRange(1, 2**63 - 1))  # an SQLite row id
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def audit_show(ctx: click.Context, upload_id: int, as_json: bool) -> None:
    """One upload: the exact bytes sent and the raw reply."""
    from assistant.store import cache, ledger

    with open_store(ctx) as store:
        _settle(store)
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
@click.option(
    "--adopt",
    is_flag=True,
    help="First sign the uploads written before the ledger had MACs, if their chain "
    "verifies (only for a database you know was not changed since).",
)
@click.pass_context
def audit_verify(ctx: click.Context, as_json: bool, noted: str | None, adopt: bool) -> None:
    """Recompute the hash chain and each row's MAC (the store key); name the first row
    that does not match (exit 1)."""
    if noted is not None and not re.fullmatch(r"[0-9]{1,19}:[0-9a-f]+", noted):
        raise errors.InputError(f"--head {noted!r} is not ID:HASH (as `drag audit head` prints)")
    with open_store(ctx) as store:
        signed, refused = store.adopt_ledger() if adopt else (0, None)
        verdict = store.verify_ledger(noted)
    if refused and not as_json:
        secho(f"nothing was signed: {refused}", fg="red")
    if signed and not as_json:
        echo(f"signed {signed} uploads written before the ledger had MACs")
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

    with open_store(ctx) as store:
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
@click.option("--output", "-o", type=GivenPath(dir_okay=False), help="File (default: stdout).")
@click.option("--since", help="Only uploads after this (30d, 12h, 2026-11-01).")
@click.pass_context
def audit_export(ctx: click.Context, fmt: str, output: str | None, since: str | None) -> None:
    """Every upload with its payload, as JSON lines or Markdown."""
    from assistant.store import ledger

    when = parse_since(since) if since is not None else None
    with open_store(ctx) as store:
        _settle(store)
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
                    *_fenced(r["request"] or "", "json"),
                    "",
                    "Reply:",
                    "",
                    *_fenced(r["reply"] or ""),
                ]
        text = safetext.plain("\n".join(parts) + "\n")
    if output:
        from pathlib import Path

        try:
            paths.write_private(Path(output), text, make_folder=False)
        except OSError as exc:  # a folder that is not there, no permission, a full disk
            raise errors.DragError(f"cannot write {output}: {exc.strerror or exc}") from None
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

    with open_store(ctx) as store:
        _settle(store)
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


def _fenced(text: str, info: str = "") -> list[str]:
    """``text`` as a Markdown code block it cannot close: the fence is longer than any
    run of backticks in it (a reply holding a fence of its own would otherwise end the
    block and be read as Markdown: images fetched, headings forged)."""
    text = safetext.plain(text)  # as it will be shown: a control between backticks goes
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + info, text, fence]
