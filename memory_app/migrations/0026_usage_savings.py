from django.db import migrations, models


class Migration(migrations.Migration):
    """The usage ledger tells the window's saving apart from compaction's."""

    dependencies = [
        ("memory_app", "0025_context_record"),
    ]

    operations = [
        migrations.AddField(
            model_name="contextserve",
            name="window_kept_out_tokens",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
    ]
