from django.db import migrations, models
from django.db.models import F, Value
from django.db.models.functions import Concat


def _lexical_with_context(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    from memory_app.search import schema

    schema.reinstall_lexical(schema_editor.connection)
    # The indexer reads every session again: unchanged texts keep their vectors and gain their
    # context; a message whose text opens with its speaker's label is embedded again without it.
    Session = apps.get_model("memory_app", "Session")
    Session.objects.update(search_indexed_seq=0)
    SearchItem = apps.get_model("memory_app", "SearchItem")
    labelled = SearchItem.objects.filter(kind__in=["message", "attachment"]).exclude(agent="")
    labelled.filter(text__startswith=Concat(F("agent"), Value(":"))).update(state="pending")


def _lexical_text_only(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    from memory_app.search import schema

    schema.reinstall_lexical(schema_editor.connection, text_only=True)


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0020_message_occurred_at"),
    ]

    operations = [
        migrations.AddField(
            model_name="searchitem",
            name="context",
            field=models.TextField(blank=True, default="", db_default=""),
        ),
        migrations.RunPython(_lexical_with_context, _lexical_text_only),
    ]
