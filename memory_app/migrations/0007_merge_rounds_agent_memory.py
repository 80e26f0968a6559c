from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0006_rounds"), ("memory_app", "0006_agent_memory")]

    operations = []
