import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0026_usage_savings"),
    ]

    operations: list[migrations.operations.base.Operation] = [
        migrations.AlterField(
            model_name="searchitem",
            name="kind",
            field=models.CharField(
                choices=[
                    ("message", "message"),
                    ("summary", "summary"),
                    ("fact", "fact"),
                    ("record", "agent record entry"),
                    ("experience", "experience"),
                    ("shared_memory", "shared memory entry"),
                    ("attachment", "attachment"),
                    ("memory_file", "memory file"),
                ],
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="MemoryFile",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("agent", models.CharField(blank=True, max_length=100)),
                ("path", models.CharField(max_length=1024)),
                ("content", models.TextField(blank=True, default="")),
                ("size", models.PositiveIntegerField(default=0)),
                ("version", models.PositiveIntegerField(default=1)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("updated_by", models.CharField(blank=True, max_length=200)),
                ("deleted_at", models.DateTimeField(blank=True, null=True)),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="memory_files", to="memory_app.team"
                    ),
                ),
            ],
            options={"ordering": ["agent", "path"]},
        ),
        migrations.CreateModel(
            name="MemoryFileVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("version", models.PositiveIntegerField()),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("create", "create"),
                            ("edit", "edit"),
                            ("rename", "rename"),
                            ("delete", "delete"),
                            ("revert", "revert"),
                        ],
                        max_length=8,
                    ),
                ),
                ("path", models.CharField(max_length=1024)),
                ("content", models.TextField(blank=True, default="")),
                ("diff", models.TextField(blank=True, default="")),
                ("author", models.CharField(blank=True, max_length=200)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "file",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="versions",
                        to="memory_app.memoryfile",
                    ),
                ),
                (
                    "team",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memory_app.team"
                    ),
                ),
            ],
            options={"ordering": ["file", "-version"]},
        ),
        migrations.AddConstraint(
            model_name="memoryfile",
            constraint=models.UniqueConstraint(
                condition=models.Q(("deleted_at__isnull", True)),
                fields=("team", "agent", "path"),
                name="uniq_live_memory_file",
            ),
        ),
        migrations.AddConstraint(
            model_name="memoryfileversion",
            constraint=models.UniqueConstraint(fields=("file", "version"), name="uniq_memory_file_version"),
        ),
    ]
