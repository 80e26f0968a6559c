from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def binary_namespace_order(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Compare store namespaces byte by byte on PostgreSQL, as SQLite's default BINARY collation does.

    A namespace prefix is read as a range ("a.b." <= namespace < "a.b/"), which a linguistic
    collation (en_US.UTF-8 ignores punctuation at first) would cut wrongly, and equality must keep
    ("Foo",) and ("foo",) apart. The column is created before its index, so the index is built in
    this order too.
    """
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute('ALTER TABLE memory_app_fact ALTER COLUMN store_namespace TYPE text COLLATE "C"')


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0028_fact_sightings"),
    ]

    operations: list[migrations.operations.base.Operation] = [
        migrations.AddField(
            model_name="fact",
            name="store_namespace",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="fact",
            name="store_value",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.RunPython(binary_namespace_order, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(
                condition=models.Q(("invalidated_at__isnull", True), ("store_namespace__isnull", False)),
                fields=["team", "scope_key", "store_namespace", "-created_at"],
                name="fact_store_live",
            ),
        ),
    ]
