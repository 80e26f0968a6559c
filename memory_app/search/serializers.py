"""What the search endpoint accepts and returns."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NotRequired, TypedDict

from rest_framework import serializers

from memory_app.search.models import SearchKind
from memory_app.search.selectors import Hit, HitExplain, HitSource

QUERY_MAX_CHARS = 1000
SEARCH_MAX_LIMIT = 50


class SearchInputSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=QUERY_MAX_CHARS, trim_whitespace=True)
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=SearchKind.choices), required=False, allow_empty=False, max_length=7
    )
    session = serializers.UUIDField(required=False)
    agent = serializers.CharField(required=False, max_length=200)
    role = serializers.CharField(required=False, max_length=200)
    as_of = serializers.DateTimeField(required=False)
    include_invalidated = serializers.BooleanField(required=False, default=False)
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=SEARCH_MAX_LIMIT)
    explain = serializers.BooleanField(required=False, default=False)

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # `from` is a Python keyword: declared here under its wire name.
        fields["from"] = serializers.DateTimeField(required=False)
        fields["to"] = serializers.DateTimeField(required=False)
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since, until = attrs.get("from"), attrs.get("to")
        if since is not None and until is not None and until < since:
            raise serializers.ValidationError({"to": ["must not be before from"]})
        return attrs


class SearchSourceSerializer(serializers.Serializer):
    session = serializers.UUIDField(allow_null=True)
    seq = serializers.IntegerField(allow_null=True)
    message_id = serializers.UUIDField(allow_null=True)
    run_id = serializers.UUIDField(allow_null=True, help_text="the compaction run whose summary this is")
    fact_id = serializers.UUIDField(allow_null=True)
    record_entry_id = serializers.IntegerField(allow_null=True)
    experience_id = serializers.IntegerField(allow_null=True)
    shared_memory_id = serializers.IntegerField(allow_null=True)
    attachment_id = serializers.IntegerField(allow_null=True)
    chunk = serializers.IntegerField(help_text="the piece of a long source this is (0 = its start)")
    agent = serializers.CharField()
    role = serializers.CharField()


class SearchExplainSerializer(serializers.Serializer):
    lexical_rank = serializers.IntegerField(allow_null=True)
    lexical_score = serializers.FloatField(allow_null=True)
    vector_rank = serializers.IntegerField(allow_null=True)
    vector_similarity = serializers.FloatField(allow_null=True)
    lexical_share = serializers.FloatField(help_text="its word match as a share of the query's best one (0-1)")
    coverage = serializers.FloatField(help_text="the share of the query's words its text holds (0-1)")
    best_coverage = serializers.FloatField(
        help_text="the best coverage among the query's candidates: how much the words explain"
    )
    similarity_gap = serializers.FloatField(help_text="its similarity minus the best candidate's (<= 0)")
    substance = serializers.FloatField(help_text="content words of raw conversation, up to 8, as a share (0-1)")
    speaker_named = serializers.BooleanField(help_text="the query names its speaker")
    in_time = serializers.BooleanField(help_text="said within the time the query names")
    holds_identifiers = serializers.BooleanField(
        help_text="its own text holds every identifier the query names (a word of letters and digits: an error "
        "code, a ticket, a commit); such items come first"
    )
    relevance = serializers.FloatField(help_text="the relevance model's figure from the above (0-1)")
    recency_factor = serializers.FloatField()
    kind_weight = serializers.FloatField()
    fused_score = serializers.FloatField()
    live = serializers.BooleanField()


class SearchHitData(TypedDict):
    """One result as the endpoint answers it (SearchHitSerializer's fields): the renderer writes the times."""

    kind: str
    id: str
    item_id: int
    text: str
    snippet: str
    source: HitSource
    occurred_at: datetime
    invalidated_at: datetime | None
    score: float
    explain: NotRequired[HitExplain]


class SearchHitSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=SearchKind.choices)
    id = serializers.CharField(help_text="the source's id (message, fact, run, record entry, experience ...)")
    item_id = serializers.IntegerField()
    text = serializers.CharField()
    snippet = serializers.CharField(help_text="the part of the text around the matched words, marked **so**")
    source = SearchSourceSerializer()  # type: ignore[assignment]  # a field named like Field.source
    occurred_at = serializers.DateTimeField()
    invalidated_at = serializers.DateTimeField(allow_null=True)
    score = serializers.FloatField()
    explain = SearchExplainSerializer(required=False)

    @staticmethod
    def of(hit: Hit, *, explain: bool) -> SearchHitData:
        data: SearchHitData = {
            "kind": hit.item.kind,
            "id": hit.source_id,
            "item_id": hit.item.pk,
            "text": hit.item.text,
            "snippet": hit.snippet,
            "source": hit.source(),
            "occurred_at": hit.item.occurred_at,
            "invalidated_at": hit.item.invalidated_at,
            "score": hit.scored.fused_score,
        }
        if explain:
            data["explain"] = hit.explain()
        return data


class SearchEnginesSerializer(serializers.Serializer):
    lexical = serializers.CharField()
    vector = serializers.CharField()
    model = serializers.CharField()
    vector_error = serializers.CharField(help_text="why vector search was skipped, if it was")


class SearchOutputSerializer(serializers.Serializer):
    query = serializers.CharField()
    results = SearchHitSerializer(many=True)
    engines = SearchEnginesSerializer()
    pending = serializers.IntegerField(help_text="items of the team not embedded yet (found by words only)")
