"""The (team, indexed_at) index: each search without pgvector reads the vectors indexed since its
team's in-process vector index was last brought up to date (memory_app/search/ann.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0022_worker_heartbeats"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="searchitem",
            index=models.Index(fields=["team", "indexed_at"], name="search_item_team_indexed"),
        ),
    ]
