"""manage.py reindex [--team T] [--kind K] [--now]: rebuild recall's search index from the sources.

Unchanged text keeps its vector (the text hash); a source that is gone loses its entries; vectors
of another model than the configured one are computed again. The embedding is queued as index
runs on the "search" queue, or done here with --now (no worker needed). Also enables pgvector
when the database server gained the extension after migrate.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_app.search import schema
from memory_app.search import services as search
from memory_app.search.models import IndexRun, SearchKind
from memory_app.tenancy.models import Team


class Command(BaseCommand):
    help = "Rebuild the search index (all teams, or --team), for every kind or --kind."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", help="the team's name or id (default: every team)")
        parser.add_argument("--kind", choices=SearchKind.values, help="one kind of memory (default: all)")
        parser.add_argument("--now", action="store_true", help="embed here and now instead of queueing runs")

    def handle(self, *args: Any, **options: Any) -> None:
        team_id = self._team_id(options.get("team"))
        if schema.install_pgvector():
            self.stdout.write("Vector engine: pgvector.")
        else:
            self.stdout.write("Vector engine: in-process IVF index (no pgvector), rebuilt by the index runs.")
        counts = search.search_reindex(team_id=team_id, kind=options.get("kind"))
        self.stdout.write(
            f"Queued {counts['teams']} team(s): {counts['stale']} piece(s) changed, "
            f"{counts['reembed']} to embed again with the current model."
        )
        if options["now"]:
            runs = IndexRun.objects.filter(status=IndexRun.Status.PENDING)
            if team_id is not None:
                runs = runs.filter(team_id=team_id)
            progressing = True
            while progressing:  # each run may leave a follow-up (SEARCH_RUN_SECONDS); stop at a retry
                progressing = False
                for run in list(runs):
                    outcome = search.search_index_execute(run_id=str(run.pk))
                    self.stdout.write(f"team {run.team_id}: {outcome}")
                    progressing = progressing or outcome == "done"
        self.stdout.write(self.style.SUCCESS("Done."))

    def _team_id(self, team: str | None) -> int | None:
        if not team:
            return None
        found = Team.objects.filter(pk=int(team)).first() if team.isdigit() else Team.objects.filter(name=team).first()
        if found is None:
            raise CommandError(f"No team {team!r}.")
        return int(found.pk)
