"""manage.py bootstrap: a demo team, an admin user and an API key, idempotently.

Credentials are printed only when they are created; later runs say they exist.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from memory_app.tenancy import services as tenancy
from memory_app.tenancy.models import ApiKey, TeamMembership


class Command(BaseCommand):
    help = "Create the demo team, an admin user and a first API key if they do not exist."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--team", default="demo")
        parser.add_argument("--username", default="admin")
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        team = tenancy.team_get_or_create(name=options["team"])
        user_model = get_user_model()
        user = user_model.objects.filter(username=options["username"]).first()
        if user is None:
            password = secrets.token_urlsafe(12)
            user = user_model.objects.create_superuser(options["username"], "", password)
            self.stdout.write(
                f"Admin user created: log in at {options['base_url']}/accounts/login/ as {user.username} / {password}"
            )
        else:
            self.stdout.write(
                f"Admin user {user.username!r} exists (reset its password with `manage.py changepassword`)."
            )
        TeamMembership.objects.get_or_create(team=team, user=user, defaults={"is_admin": True})

        if ApiKey.objects.filter(team=team, name="bootstrap").exists():
            self.stdout.write(
                f"Team {team.name!r} already has its bootstrap key (new one: "
                f"`manage.py create_api_key --team {team.name}`)."
            )
            return
        _, raw_key = tenancy.api_key_create(team=team, name="bootstrap", role=ApiKey.Role.ADMIN)
        base = options["base_url"]
        self.stdout.write(f"API key for team {team.name!r} (shown once): {raw_key}")
        self.stdout.write("Try it:")
        self.stdout.write(
            f"  curl -s -X POST {base}/api/v1/sessions/ -H 'Authorization: Bearer {raw_key}' "
            "-H 'Content-Type: application/json' -d '{\"system_prompt\": \"You are helpful\"}'"
        )
