"""PostgreSQL keeps an item's vector in its row. An item row (its text, its tsvector, its 1,536-byte
vector) is often over the 2 kB past which PostgreSQL moves its largest values to the TOAST table
(after trying to compress them: random floats do not compress), so reading a search's candidates back
read two places per item. With the row's target raised to 4 kB and the vector stored MAIN (inline,
moved out only if nothing else is left to move), a row keeps its vector: reading 160 candidates' vectors
back took 1.5-1.9 ms instead of 2.4-2.8 (bench/README.md). Rows already written keep theirs where they
are until rewritten (re-embedded, or a VACUUM FULL). SQLite keeps every value in its row anyway."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

TABLE = "memory_app_searchitem"


def keep_inline(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} SET (toast_tuple_target = 4080)")
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN embedding SET STORAGE MAIN")


def as_before(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"ALTER TABLE {TABLE} RESET (toast_tuple_target)")
        schema_editor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN embedding SET STORAGE EXTENDED")


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0032_search_postings"),
    ]

    operations = [
        migrations.RunPython(keep_inline, as_before),
    ]
