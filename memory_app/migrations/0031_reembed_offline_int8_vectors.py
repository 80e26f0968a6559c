"""The offline model became `all-MiniLM-L6-v2-q8` (the same network with its matrix products in int8:
memory_app/search/embeddings/quantize.py). A search compares only vectors of the configured model,
so items embedded by the former `all-MiniLM-L6-v2-int8` would be found by their words alone until
someone ran `manage.py reindex`. Marking them pending instead lets the indexer embed them again on
its own: the sweep wakes every team with pending items, the Ops page counts them as backlog, and
each old vector serves nobody anyway. Only the old offline model's items are touched: vectors of an
embedding server keep their model's name and stay as they are."""

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

FORMER_OFFLINE_MODEL = "all-MiniLM-L6-v2-int8"


def embed_again(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    items = apps.get_model("memory_app", "SearchItem")
    items.objects.filter(state="indexed", embedding_model=FORMER_OFFLINE_MODEL).update(state="pending")


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0030_search_item_team_time"),
    ]

    operations = [
        migrations.RunPython(embed_again, migrations.RunPython.noop),
    ]
