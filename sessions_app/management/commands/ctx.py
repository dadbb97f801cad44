"""`python manage.py ctx …`: ctxweb from the command line. `--json` prints one JSON object, nothing else."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO, cast

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from compaction import jsonvalues
from compaction.messages import MessageError
from compaction.search_text import plain_snippet
from compaction.usage import render_bar
from sessions_app import steps, tasks
from sessions_app.errors import ServiceError
from sessions_app.management import count_cache_text
from sessions_app.management.history_text import render_history
from sessions_app.management.level_colours import colour_wanted, level_painter
from sessions_app.management.progress_bar import bars, wanted
from sessions_app.management.project_overview import overview_payload, render_overview
from sessions_app.models import AgentSession
from sessions_app.selectors import access, compactions, count_cache, model_context, usage
from sessions_app.selectors.dashboard import CLOSEST, project_levels
from sessions_app.selectors.history import history_payload, session_history
from sessions_app.selectors.search import Scope, search
from sessions_app.services import (
    compaction_runs,
    counting,
    importing,
    keys,
    planning,
    projects,
    redaction_backfill,
    retention,
    reverting,
    webhook_delivery,
)
from sessions_app.services import count_cache as count_cache_service

IMPORT_FORMATS = ("claude-code", "openai", "anthropic", "codex")


def _progress_flags(parser: Any) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--progress", action="store_true", default=None, help="draw a progress bar on stderr (default: on a terminal)"
    )
    group.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


class Command(BaseCommand):
    help = "ctxweb: import transcripts, show status, count tokens, manage API keys, load the demo."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)

        p = sub.add_parser("import", help="import one session from a transcript file")
        p.add_argument("file")
        p.add_argument("--format", required=True, choices=IMPORT_FORMATS)
        p.add_argument("--project", default="Imports", help="project id or name (created if missing)")
        p.add_argument("--user", help="owner (default: the first superuser, else a 'ctxweb' user)")
        p.add_argument("--name")
        p.add_argument("--model")
        p.add_argument("--context-window", type=int)
        p.add_argument("--no-auto", action="store_true", help="turn automatic compaction off for this session")
        p.add_argument("--episode", type=int, help="which conversation of a file that holds several (0-based)")
        p.add_argument("--json", action="store_true")
        _progress_flags(p)

        p = sub.add_parser("status", help="a session's context breakdown; without one, the project's overview")
        p.add_argument("session", nargs="?", help="id or external id (none: the project overview)")
        p.add_argument("--history", action="store_true", help="context used over the session's life, with compactions")
        p.add_argument("--project", help="without SESSION: project id or name (default: the user's only project)")
        p.add_argument("--user", help="whose projects (default: the first superuser)")
        p.add_argument("--top", type=int, default=CLOSEST, help="without SESSION: how many of the closest to show")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("count", help="count an Anthropic count_tokens body (or a list of them) from stdin")
        p.add_argument("--model", help="count as this model (overrides the body's model)")
        p.add_argument(
            "--stats", action="store_true", help="instead of counting: the exact-count cache's hits, misses and size"
        )
        p.add_argument(
            "--clear",
            action="store_true",
            help="instead of counting: remove every cached exact count and reset the hits and misses",
        )
        p.add_argument(
            "--json", action="store_true", help="counts are always JSON; with --stats/--clear, JSON instead of a line"
        )

        p = sub.add_parser("context", help="the model-ready request of a session")
        p.add_argument("session")
        p.add_argument("--format", choices=["anthropic", "openai"], default="anthropic")
        p.add_argument("--json", action="store_true", help="accepted for symmetry; output is always JSON")

        p = sub.add_parser("compact", help="compact a session now, in-process (or preview, or revert)")
        p.add_argument("session")
        p.add_argument("--level", choices=["compact", "summarize", "handoff"], default="compact")
        p.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
        p.add_argument("--revert", action="store_true", help="revert the newest compaction (or --id)")
        p.add_argument("--id", type=int, help="with --revert: this compaction")
        p.add_argument("--instructions", default="", help="extra guidance for the summarizer")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("handoff", help="write the handoff document of a session")
        p.add_argument("session")
        p.add_argument("-o", "--output", help="write the document here instead of stdout")
        p.add_argument("--format", choices=["txt", "md", "json"], default="txt")
        p.add_argument("--continue", dest="continue_", action="store_true", help="also start the continuation")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("prune", help="archive inactive sessions, purge expired backups, trim context documents")
        p.add_argument("--dry-run", action="store_true", help="report the counts a real run would have; write nothing")
        p.add_argument("--older-than", type=int, metavar="DAYS", help="inactive for this long (default: each policy's)")
        p.add_argument("--json", action="store_true")
        _progress_flags(p)

        p = sub.add_parser("redact", help="replace the secrets in what is already stored (resumable)")
        p.add_argument("--dry-run", action="store_true", help="count what a real run would replace; write nothing")
        p.add_argument("--restart", action="store_true", help="start from the first row, not where a run stopped")
        p.add_argument("--batch", type=int, default=redaction_backfill.BATCH, help="rows per transaction")
        p.add_argument("--json", action="store_true")
        _progress_flags(p)

        p = sub.add_parser("search", help="search what sessions held: messages, originals, checkpoints, handoffs")
        p.add_argument("query", help='words, "a phrase", or, -word')
        p.add_argument("--project", help="one project's (id)")
        p.add_argument("--session", help="one session's (id or external id)")
        p.add_argument("--role", help="messages of this role only")
        p.add_argument("--state", help="messages in this state only (active, compacted, summarized, archived)")
        p.add_argument("--limit", type=int, default=20, help="at most this many hits (100 at most)")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("apikey", help="print a new API key for a user")
        p.add_argument("user")
        p.add_argument("--create-user", action="store_true")
        p.add_argument("--name", default="cli")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("demo", help="load a small demo project")
        p.add_argument("--json", action="store_true")

        p = sub.add_parser("webhooks", help="send the webhook deliveries that are due, in this process")
        p.add_argument("--json", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        try:
            getattr(self, f"do_{action}")(options)
        except ServiceError as exc:
            raise CommandError(f"{exc.detail} ({exc.code})") from None
        except MessageError as exc:
            raise CommandError(f"{exc.detail} ({exc.code})") from None
        except OSError as exc:  # a file that can't be read or written
            raise CommandError(str(exc)) from None

    # ------------------------------------------------------------------ helpers

    def emit(self, options: dict[str, Any], data: Any, human: str | None = None) -> None:
        if options.get("json") or human is None:
            self.stdout.write(json.dumps(data, ensure_ascii=False, default=str))
        else:
            self.stdout.write(human)

    def err_stream(self) -> TextIO:
        """stderr itself (not Django's wrapper, which ends every write with a newline): progress bars."""
        return cast(TextIO, getattr(self.stderr, "_out", sys.stderr))

    def cli_user(self, username: str | None, *, create: bool = True) -> Any:
        User = get_user_model()
        if username:
            user = User.objects.filter(username=username).first()
            if user is None:
                raise CommandError(f"No user {username!r}.")
            return user
        user = User.objects.filter(is_superuser=True).order_by("pk").first()
        if user is None and not create:
            raise CommandError("No superuser to act as: name a user with --user.")
        return user or User.objects.get_or_create(username="ctxweb")[0]

    def paint(self, options: dict[str, Any]) -> Callable[[str], str]:
        return level_painter(colour_wanted(options, self.stdout))

    # ------------------------------------------------------------------ actions

    def do_import(self, options: dict[str, Any]) -> None:
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"No such file: {path}")
        user = self.cli_user(options["user"])
        ref = options["project"]
        project = access.project_find_or_none(ref, user=user)
        if project is None:
            if access.as_pk(ref) is not None:
                raise CommandError(f"No project {ref}.")
            project = projects.project_create(user=user, name=ref)
        with bars(wanted(options, self.err_stream()), self.err_stream()) as shown:
            reading = shown.phase(f"Reading {path.name} ({path.stat().st_size / 1e6:.1f} MB)")
            transcript = importing.transcript_parse(path.read_bytes(), options["format"])
            if reading is not None:
                reading(1, 1)
            result = steps.transcript_import(
                user=user,
                project=project,
                transcript=transcript,
                name=options["name"] or path.stem,
                model=options["model"],
                context_window=options["context_window"],
                auto_compact=False if options["no_auto"] else None,
                episode=options["episode"],
                on_progress=shown.phase("Storing messages"),
            )
        data = importing.import_summary(result)
        skipped = ", ".join(f"{k}: {v}" for k, v in sorted(result.skipped.items())) or "none"
        human = (
            f"Imported {result.messages} messages into session {result.session.pk} "
            f"({result.session.name}) in project {project.name!r}.\nSkipped lines: {skipped}\n"
            + (f"Sub-agent sessions: {', '.join(str(s.pk) for s in result.sidechains)}\n" if result.sidechains else "")
            + "\n"
            + self.bar(result.session, options)
        )
        self.emit(options, data, human)

    def bar(self, session: AgentSession, options: dict[str, Any]) -> str:
        status = usage.session_status(session)
        current = usage.session_usage(session)
        bar = render_bar(current, paint=self.paint(options))
        lines = [bar, "", status["recommendation"], f"Counts: {status['token_source']}."]
        lines += [f"Warning: {w}" for w in status["warnings"]]
        return "\n".join(lines)

    def do_status(self, options: dict[str, Any]) -> None:
        if options["session"] is None:
            self.project_status(options)
            return
        if options["project"] is not None:
            raise CommandError("--project is for the project overview: leave SESSION out.")
        session = access.session_find(options["session"])
        if options["history"]:
            history = session_history(session)
            self.emit(options, history_payload(history), render_history(history))
            return
        self.emit(options, usage.session_status(session), self.bar(session, options))

    def do_search(self, options: dict[str, Any]) -> None:
        """Every project's sessions (an operator's), best hits first."""
        scope = Scope(None, options["project"], options["session"], options["role"], options["state"])
        hits = search(scope, options["query"], limit=min(max(options["limit"], 1), 100))
        lines = [
            f"{h.rank:8.4f}  session {h.session_id} {h.ref:>7} {h.kind:10} {h.state:10} "
            + plain_snippet(re.sub(r"\s+", " ", h.snippet))
            for h in hits
        ]
        self.emit(options, [asdict(h) for h in hits], "\n".join(lines) or "Nothing found.")

    def project_status(self, options: dict[str, Any]) -> None:
        if options["history"]:
            raise CommandError("--history is a session's: name the SESSION.")
        if options["top"] < 0:
            raise CommandError("--top takes a number of sessions, 0 or more.")
        user = self.cli_user(options["user"], create=False)
        ref = options["project"]
        if ref is not None:
            project = access.project_find_or_none(ref, user=user)
            if project is None:
                raise CommandError(f"No project {ref!r}" + ("." if access.as_pk(ref) else f" among {user}'s."))
        else:
            mine = list(access.project_list_for(user).order_by("pk")[:11])
            if len(mine) != 1:
                named = ", ".join(f"{p.pk} ({p.name})" for p in mine[:10]) + (", …" if len(mine) > 10 else "")
                raise CommandError(
                    f"{user} has no project: name one with --project."
                    if not mine
                    else f"Say which project with --project (its id or name): {named}."
                )
            project = mine[0]
        levels, closest = project_levels(project=project, closest=options["top"])
        human = render_overview(project, levels, closest, paint=self.paint(options))
        self.emit(options, overview_payload(project, levels, closest), human)

    def do_count(self, options: dict[str, Any]) -> None:
        if options["stats"] and options["clear"]:
            raise CommandError("--stats or --clear, not both.")
        if options["stats"]:
            self.count_stats(options)
            return
        if options["clear"]:
            self.count_clear(options)
            return
        raw = sys.stdin.read()
        try:
            body = jsonvalues.loads(raw)
        except ValueError as exc:
            raise CommandError(f"stdin is not JSON: {exc}") from None
        unstorable = jsonvalues.problem(body)
        if unstorable is not None:  # what POST /count_tokens/ refuses, refused here too
            raise CommandError(f"{unstorable[1].replace('the value', 'stdin', 1)} ({unstorable[0]})")
        bodies = body if isinstance(body, list) else [body]
        results = [
            {"input_tokens": counting.count_request_tokens(b, model=options["model"]).input_tokens} for b in bodies
        ]
        self.emit(options, results if isinstance(body, list) else results[0])

    def count_stats(self, options: dict[str, Any]) -> None:
        stats = count_cache.exact_count_cache_stats()
        self.emit(options, stats.as_dict(), count_cache_text.stats_line(stats))

    def count_clear(self, options: dict[str, Any]) -> None:
        backend = count_cache.exact_count_cache_stats().backend
        removed = count_cache_service.exact_count_cache_clear()
        self.emit(options, {"removed": removed, "backend": backend}, count_cache_text.cleared_line(removed, backend))

    def do_context(self, options: dict[str, Any]) -> None:
        session = access.session_find(options["session"])
        self.emit(options, model_context.session_context(session, fmt=options["format"]))

    def do_compact(self, options: dict[str, Any]) -> None:
        session = access.session_find(options["session"])
        if options["revert"]:
            pk = options["id"] or compactions.newest_revertible_id(session.pk)
            record = session.compactions.filter(pk=pk).first() if pk else None
            if record is None:
                raise CommandError("No compaction of this session to revert.")
            record = reverting.compaction_revert(compaction=record)
            tasks.webhooks_send()
        elif options["dry_run"]:
            preview = planning.preview(session, options["level"], instructions=options["instructions"])
            lines = [
                f"Dry run of {options['level']} on session {session.pk}: {preview['tokens_before']:,} → "
                f"{preview['tokens_after']:,} tokens (saves {preview['saved_tokens']:,})"
            ]
            lines += [
                f"  {name}: {v['messages']} messages, {v['tokens_before']:,} → {v['tokens_after']:,}"
                for name, v in preview["strategies"].items()
            ]
            lines += [f"  note: {n}" for n in preview["notes"]]
            self.emit(options, preview, "\n".join(lines))
            return
        else:
            record = compaction_runs.compaction_request(
                session=session,
                level=options["level"],
                user=None,
                instructions=options["instructions"],
            )  # not sent to the workers: it runs right here
            # Through the task, in this process: transient model errors are retried with backoff and
            # end in the offline summary, so the record never stays "running" with no beat to reclaim it.
            tasks.run_compaction.apply((record.pk,))
            record.refresh_from_db()
        human = f"Compaction {record.pk} ({record.level}): {record.status}"
        if record.tokens_after is not None:
            human += f", {record.tokens_before:,} → {record.tokens_after:,} tokens"
        if record.error:
            human += f"\n{record.error}"
        human += "\n\n" + self.bar(AgentSession.objects.get(pk=session.pk), options)
        self.emit(options, compactions.compaction_summary(record), human)

    def do_handoff(self, options: dict[str, Any]) -> None:
        session = access.session_find(options["session"])
        document = steps.handoff_create(session=session, user=None, continue_=options["continue_"])
        rendered = {"txt": document.text, "md": document.markdown, "json": json.dumps(document.data, indent=2)}
        body = rendered[options["format"]]
        data: dict[str, Any] = {
            "handoff": document.pk,
            "session": session.pk,
            "checkpoint": document.checkpoint_id,
            "continuation": document.continuation_id,
        }
        if options["output"]:
            Path(options["output"]).write_text(body, encoding="utf-8")
            data["output"] = options["output"]
            human = f"Wrote handoff {document.pk} to {options['output']}"
        else:
            data["text"] = body
            human = body
        if document.continuation_id:
            human += f"\nContinue in session {document.continuation_id}."
        self.emit(options, data, human)

    def do_prune(self, options: dict[str, Any]) -> None:
        days = options["older_than"]
        if days is not None and days < 0:
            raise CommandError("--older-than takes a number of days, 0 or more.")
        with bars(wanted(options, self.err_stream()), self.err_stream()) as shown:
            counts = retention.prune_run(
                dry_run=options["dry_run"], older_than_days=days, on_progress=shown.phase("Pruning")
            )
        verb = "Would archive" if options["dry_run"] else "Archived"
        human = (
            f"{verb} {counts['messages_archived']:,} messages of {counts['sessions_archived']:,} inactive sessions; "
            f"{'would purge' if options['dry_run'] else 'purged'} {counts['backups_purged']:,} revert backups; "
            f"{'would trim' if options['dry_run'] else 'trimmed'} {counts['context_documents_trimmed']:,} context "
            f"documents ({counts['context_lines_archived']:,} lines)."
        )
        self.emit(options, counts, human)

    def do_redact(self, options: dict[str, Any]) -> None:
        if options["batch"] < 1:
            raise CommandError("--batch takes a number of rows, 1 or more.")
        tables: dict[str, dict[str, Any]] = {}
        with bars(wanted(options, self.err_stream()), self.err_stream()) as shown:
            moved: dict[str, Any] = {}
            for step in redaction_backfill.stored_redact(
                dry_run=options["dry_run"], batch=options["batch"], restart=options["restart"]
            ):
                if step.table not in moved:
                    moved[step.table] = shown.phase(step.table.capitalize())
                if moved[step.table] is not None:
                    moved[step.table](step.read, max(step.left, step.read))
                tables[step.table] = {"read": step.read, "changed": step.changed, "found": dict(step.found)}
        found = sum((Counter(t["found"]) for t in tables.values()), Counter())
        data = {"dry_run": options["dry_run"], "tables": tables, "found": dict(sorted(found.items()))}
        verb = "Would replace" if options["dry_run"] else "Replaced"
        rows = sum(t["changed"] for t in tables.values())
        kinds = ", ".join(f"{kind} × {n}" for kind, n in sorted(found.items())) or "none"
        self.emit(options, data, f"{verb} {found.total():,} secrets in {rows:,} rows ({kinds}).")

    def do_apikey(self, options: dict[str, Any]) -> None:
        User = get_user_model()
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            if not options["create_user"]:
                raise CommandError(f"No user {options['user']!r}; add --create-user to create one.")
            user = User.objects.create_user(username=options["user"])
        key, raw = keys.apikey_create(user=user, name=options["name"])
        self.emit(options, {"user": user.username, "key": raw, "prefix": key.prefix}, raw)

    def do_demo(self, options: dict[str, Any]) -> None:
        result = steps.demo_load()
        data = {
            "username": result.username,
            "password": result.password,
            "project": result.project.pk,
            "sessions": [s.pk for s in result.sessions],
            "created": result.created,
            "admin": result.admin,
        }
        human = (
            f"{'Loaded' if result.created else 'Already loaded:'} demo project {result.project.name!r} "
            f"with {len(result.sessions)} sessions.\nSign in as {result.username} / {result.password}"
            + (", Django admin (/admin/) too." if result.admin else "")
        )
        self.emit(options, data, human)

    def do_webhooks(self, options: dict[str, Any]) -> None:
        """What beat does every minute with a worker; for the embedded mode, where neither runs."""
        outcomes = Counter(webhook_delivery.delivery_attempt(pk).result for pk in webhook_delivery.deliveries_due())
        data = {"sent": sum(outcomes.values()), **{k: outcomes[k] for k in ("delivered", "retry", "failed")}}
        self.emit(options, data, ", ".join(f"{k}: {v}" for k, v in data.items()))
