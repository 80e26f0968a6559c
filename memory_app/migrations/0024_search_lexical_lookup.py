from django.db import migrations


def _install(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    from memory_app.search import schema

    schema.install_lexical_lookup(schema_editor.connection)


def _uninstall(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    from memory_app.search import schema

    schema.uninstall_lexical_lookup(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0023_search_item_ann_tail"),
    ]

    operations = [
        migrations.RunPython(_install, _uninstall),
    ]
