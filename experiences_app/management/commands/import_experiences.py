"""manage.py import_experiences DIR [--team T] [--dry-run] [--approve]: handcrafted_exp_*.yaml files into a team."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from experiences_app import services
from experiences_app.yaml_io import MAX_FILE_BYTES
from memory_app.tenancy.models import Team


def team_named(name: str) -> Team:
    team = Team.objects.filter(name=name).first()
    if team is None:
        raise CommandError(f"No team named {name!r} (manage.py bootstrap --team {name} creates one).")
    return team


def read_directory(directory: Path) -> list[tuple[str, bytes]]:
    """The directory's `handcrafted_exp_*.yaml` files (the experience loader's glob, not recursive), by name."""
    if not directory.is_dir():
        raise CommandError(f"{directory} is not a directory.")
    files = []
    for path in sorted(directory.glob("handcrafted_exp_*.yaml")):
        if path.is_file():
            with path.open("rb") as handle:  # read to a bound the parser rejects
                files.append((path.name, handle.read(MAX_FILE_BYTES + 1)))
    return files


class Command(BaseCommand):
    help = (
        "Import handcrafted_exp_*.yaml files from DIR into a team, deduplicated by exp_id. Prints the report "
        "(JSON with --json). Good files are imported even when others are rejected; the exit status is 1 "
        "when any file was rejected, so scripts notice."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path)
        parser.add_argument("--team", default="demo", help="Team name (default: demo)")
        parser.add_argument("--dry-run", action="store_true", help="Report what would change; write nothing")
        parser.add_argument("--approve", action="store_true", help="Approve what the import creates or changes")
        parser.add_argument("--json", action="store_true", help="Print the report as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        team = team_named(options["team"])
        files = read_directory(options["directory"])
        report = services.experiences_import(
            team=team,
            files=files,
            actor="command:import_experiences",
            dry_run=options["dry_run"],
            approve=options["approve"],
        )
        if options["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self._print(report, team)
        if report["rejected"]:
            raise CommandError(f"{len(report['rejected'])} file(s) rejected.", returncode=1)

    def _print(self, report: dict[str, Any], team: Team) -> None:
        prefix = "[dry run] " if report["dry_run"] else ""
        for kind in ("created", "updated", "unchanged"):
            for entry in report[kind]:
                line = f"{prefix}{kind:9} {entry['exp_id']} ({entry['file']})"
                if entry.get("left_selection"):
                    line += f": {entry['previous_status']} -> {entry['status']}, out of selection until approved again"
                elif entry.get("awaiting_review"):
                    line += f": {entry['previous_status']} -> {entry['status']}"
                    line += ", the approved text stays selected until the change is approved"
                self.stdout.write(line)
        for entry in report["rejected"]:
            where = f"{entry['file']}, line {entry['line']}" if entry["line"] else entry["file"]
            self.stdout.write(f"{prefix}rejected  {where}: {entry['error']}")
        counts = ", ".join(f"{len(report[k])} {k}" for k in ("created", "updated", "unchanged", "rejected"))
        if report["left_selection"]:
            counts += f" ({len(report['left_selection'])} left selection)"
        if report["awaiting_review"]:
            counts += f" ({len(report['awaiting_review'])} approved, change awaiting review)"
        self.stdout.write(f"{prefix}team {team.name!r}: {counts}")
