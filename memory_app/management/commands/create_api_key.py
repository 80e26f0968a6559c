"""manage.py create_api_key --team T: print a new key alone on the last line."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for a team (the team is created if missing). The key is shown once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", required=True, help="Team name")
        parser.add_argument("--name", default="", help="A label for the key")
        parser.add_argument("--role", default=ApiKey.Role.WRITE, choices=[r.value for r in ApiKey.Role])
        parser.add_argument("--agent", default="", help="Agent name the key acts as")

    def handle(self, *args: Any, **options: Any) -> None:
        team = tenancy.team_get_or_create(name=options["team"])
        api_key, raw_key = tenancy.api_key_create(
            team=team, name=options["name"], role=options["role"], agent_name=options["agent"]
        )
        self.stderr.write(
            f"Created {api_key.role} key {api_key.prefix}… for team {team.name!r}; store it now, it is not shown again."
        )
        self.stdout.write(raw_key)
