"""manage.py export_experiences DIR [--team T] [--status S]: a team's experiences as handcrafted_exp_*.yaml files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from experiences_app import services
from experiences_app.management.commands.import_experiences import team_named
from experiences_app.models import Experience


class Command(BaseCommand):
    help = (
        "Write the team's experiences to DIR as handcrafted_exp_{exp_id}.yaml (created if missing; files of "
        "the same name are overwritten, others left alone)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--team", default="demo", help="Team name (default: demo)")
        parser.add_argument("--status", choices=Experience.Status.values, help="Only experiences with this status")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(options["team"])
        directory: Path = options["directory"]
        files = services.experiences_export(team=team, status=options["status"])
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in files:
            (directory / name).write_bytes(content)
        self.stdout.write(f"Wrote {len(files)} experience file(s) of team {team.name!r} to {directory}.")
