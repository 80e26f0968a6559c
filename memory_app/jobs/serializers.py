"""What the API answer of every kind of job row shares."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memsite.masking import mask_secrets_in


# Shows the row's `worker_output_fields` (its error, an LLM's raw output, a payload quoting a failed
# job's error) through mask_secrets: new rows are stored masked (memory_app.jobs.lifecycle), rows
# stored before hold what the worker saw.
# No docstring on purpose: drf-spectacular would take it as the description of every subclass.
class WorkerOutputSerializer(serializers.ModelSerializer):
    worker_output_fields: tuple[str, ...] = ()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        data = super().to_representation(instance)
        for name in self.worker_output_fields:
            if data.get(name):
                data[name] = mask_secrets_in(data[name])
        return data
