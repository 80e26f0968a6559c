"""PostgreSQL's lexical engine reads each word's newest matches from postings (one row per live item
and word, newest first per team and word, kept by triggers: memory_app/search/schema.py) instead of
the full-text index's unordered matches. The items already there are posted by this migration (about
18 s for 200,000 items). SQLite's engine has no use for them (FTS5 walks its matches newest first)."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from memory_app.search import schema


def install(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema.install_postings(schema_editor.connection)


def uninstall(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    schema.uninstall_postings(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0031_reembed_offline_int8_vectors"),
    ]

    operations = [
        migrations.RunPython(install, uninstall),
    ]
