import django.utils.timezone
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def first_sighting_is_the_latest(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    # Facts stored before sightings were kept: the only sighting known for sure is the first
    # (updated_at also moves on an edit, so it cannot stand for a sighting).
    Fact = apps.get_model("memory_app", "Fact")
    Fact.objects.update(last_seen_at=models.F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0027_memory_files"),
    ]

    operations: list[migrations.operations.base.Operation] = [
        migrations.AddField(
            model_name="fact",
            name="last_seen_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
        migrations.RunPython(first_sighting_is_the_latest, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="fact",
            index=models.Index(fields=["session", "-last_seen_at"], name="fact_session_seen"),
        ),
    ]
