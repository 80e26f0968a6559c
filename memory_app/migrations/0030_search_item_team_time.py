"""PostgreSQL's lexical engine looks for a word's newest matches among its team's newest items only
(memory_app/search/engines.py, LEXICAL_WINDOW_MARGIN): this (team, occurred_at) index gives the
team's timeline (the time of every 500th newest item, read from the index alone) and the window's
items, whose bitmap meets the full-text index's matches, so only the matches inside the window are
read from the table. SQLite's engine has no use for it (FTS5 walks its matches newest first): none
there, and the model does not declare it, as it does not declare the full-text indexes."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

INDEX = "search_item_team_time"


def create_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {INDEX} ON memory_app_searchitem (team_id, occurred_at)")


def drop_index(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0029_store_namespaces"),
    ]

    operations = [
        migrations.RunPython(create_index, drop_index),
    ]
