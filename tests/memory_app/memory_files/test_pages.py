"""The memory-file pages: the team's files, one file with its history and diff, edit and revert."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from memory_app.memory_files import services as memory_files
from memory_app.memory_files.models import MemoryFile
from memory_app.tenancy.models import TeamMembership
from tests.conftest import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(client: Client, tenant: Tenant) -> Client:
    user = get_user_model().objects.create_user("ada", password="correct horse battery")
    TeamMembership.objects.create(team=tenant.team, user=user)
    client.force_login(user)
    return client


def write(tenant: Tenant, path: str, text: str, agent: str = "") -> MemoryFile:
    owner = memory_files.Owner(team=tenant.team, agent=agent, author="key:test")
    memory_files.memory_file_command(owner=owner, command={"command": "create", "path": path, "file_text": text})
    return MemoryFile.objects.get(team=tenant.team, agent=agent, path=path, deleted_at__isnull=True)


def test_the_list_shows_every_owners_files_and_filters(member, tenant):
    write(tenant, "/memories/plan.md", "ship it", agent="planner")
    write(tenant, "/memories/notes/team.md", "shared notes")
    html = member.get(reverse("dashboard:memory_files")).content.decode()
    assert "/memories/plan.md" in html and "/memories/notes/team.md" in html and "planner" in html
    filtered = member.get(reverse("dashboard:memory_files"), {"owner": "shared"}).content.decode()
    assert "/memories/notes/team.md" in filtered and "/memories/plan.md" not in filtered


def test_a_member_edits_sees_the_diff_and_reverts(member, tenant):
    file = write(tenant, "/memories/plan.md", "step one\nstep two\n")
    url = reverse("dashboard:memory_file", args=[file.pk])
    saved = member.post(
        reverse("dashboard:memory_file_edit", args=[file.pk]), {"content": "step one\nstep 2\n", "version": 1}
    )
    assert saved.status_code == 302
    file.refresh_from_db()
    assert (file.content, file.version, file.updated_by) == ("step one\nstep 2\n", 2, "user:ada")
    html = member.get(url).content.decode()
    assert 'class="d-del">-step two<' in html and 'class="d-add">+step 2<' in html
    stale = member.post(reverse("dashboard:memory_file_edit", args=[file.pk]), {"content": "lost", "version": 1})
    assert stale.status_code == 409 and "changed since version 1" in stale.content.decode()
    member.post(reverse("dashboard:memory_file_revert", args=[file.pk]), {"version": 1})
    file.refresh_from_db()
    assert (file.content, file.version) == ("step one\nstep two\n", 3)


def test_a_new_file_from_the_page_and_a_refused_path(member, tenant):
    made = member.post(reverse("dashboard:memory_file_new"), {"owner": "", "path": "/memories/new.md", "content": "hi"})
    assert made.status_code == 302
    refused = member.post(reverse("dashboard:memory_file_new"), {"owner": "", "path": "/memories/../x", "content": "x"})
    assert refused.status_code == 400 and "may not contain" in refused.content.decode()
    assert list(MemoryFile.objects.values_list("path", flat=True)) == ["/memories/new.md"]


def test_another_teams_file_is_a_404(member, other_tenant):
    file = write(other_tenant, "/memories/theirs.md", "secret")
    assert member.get(reverse("dashboard:memory_file", args=[file.pk])).status_code == 404
    edit = member.post(reverse("dashboard:memory_file_edit", args=[file.pk]), {"content": "mine", "version": 1})
    assert edit.status_code == 404
    assert member.post(reverse("dashboard:memory_file_revert", args=[file.pk]), {"version": 1}).status_code == 404
    file.refresh_from_db()
    assert (file.content, file.version) == ("secret", 1)
