"""ManagedMemoryConfig: marsys's names and defaults, its JSON, and the server's checks of it."""

from __future__ import annotations

import dataclasses

import pytest

from memory_app.conversations.models import Session
from memory_client import (
    ActiveContextPolicyConfig,
    ManagedConversationMemory,
    ManagedMemoryConfig,
    MemoryConfigError,
    SummarizationConfig,
    ToolTruncationConfig,
)
from memory_client.config import CompactionConfig


def count_tokens(message: dict) -> int:
    return 1


def custom_config() -> ManagedMemoryConfig:
    return ManagedMemoryConfig(
        threshold_tokens=12_000,
        image_token_estimate=800,  # the server's rate: a session cannot count images at another
        trigger_events=["add"],
        token_counter=count_tokens,
        active_context=ActiveContextPolicyConfig(
            processor_order=["summarization", "backward_packing"],
            excluded_processors=["tool_truncation"],
            min_reduction_ratio=0.25,
            tool_truncation=ToolTruncationConfig(max_tool_message_tokens=300, append_marker=" [cut]"),
            summarization=SummarizationConfig(grace_recent_messages=2, output_max_tokens=800, max_retained_images=3),
        ),
    )


def test_the_managed_memory_config_defaults_are_marsys_defaults():
    config = ManagedMemoryConfig()
    assert (config.threshold_tokens, config.image_token_estimate) == (150_000, 800)
    assert config.trigger_events == ["add", "get_messages"]
    assert config.cache_invalidation_events == ["add", "remove_by_id", "delete_memory"]
    assert config.token_counter is None
    policy = config.active_context
    assert (policy.enabled, policy.mode, policy.min_reduction_ratio) == (True, "compaction", 0.4)
    assert policy.processor_order == ["tool_truncation", "summarization", "backward_packing"]
    assert policy.excluded_processors == []
    assert policy.summarization == SummarizationConfig(
        enabled=True,
        grace_recent_messages=1,
        output_max_tokens=6000,
        prompt_mode="generic",
        include_original_instruction=True,
        include_image_payload_bytes=False,
        max_retained_images=None,
    )
    assert policy.tool_truncation.max_tool_message_tokens == 1200
    assert policy.sliding_window.headroom_percent == 0.1
    assert policy.backward_packing.grace_recent_messages == 1
    assert config.compaction_target_tokens == 90_000
    # marsys's backward-compatible aliases
    assert policy.compaction is policy.summarization
    assert policy.reduction_order is policy.processor_order
    assert CompactionConfig is SummarizationConfig


def test_to_dict_is_every_setting_but_the_token_counter():
    data = custom_config().to_dict()
    assert "token_counter" not in data
    assert data["threshold_tokens"] == 12_000
    assert data["active_context"]["summarization"]["max_retained_images"] == 3
    assert data["active_context"]["tool_truncation"]["append_marker"] == " [cut]"
    assert set(data["active_context"]) == {f.name for f in dataclasses.fields(ActiveContextPolicyConfig)}
    restored = ManagedMemoryConfig.from_dict(data)
    assert restored == dataclasses.replace(custom_config(), token_counter=None)


def test_from_dict_skips_settings_this_client_does_not_know():
    config = ManagedMemoryConfig.from_dict({"threshold_tokens": 7, "future_knob": 1, "active_context": {"x": 2}})
    assert config == ManagedMemoryConfig(threshold_tokens=7)


def test_a_session_cannot_count_images_at_another_rate_than_the_server(make_memory):
    with pytest.raises(MemoryConfigError) as caught:
        make_memory("managed_conversation", "sys", memory_config=ManagedMemoryConfig(image_token_estimate=500))
    assert "image_token_estimate" in str(caught.value) and "800" in str(caught.value)


def test_the_config_round_trips_through_the_server(make_memory):
    config = custom_config()
    memory = make_memory("managed_conversation", "sys", memory_config=config)

    session = Session.objects.get(pk=memory.session_id)
    assert session.memory_type == "managed_conversation"
    assert session.memory_config == config.to_dict()
    assert session.compaction_threshold == 12_000
    assert memory.config == config  # read back from the server, token_counter kept on the client
    assert memory.config.compaction_target_tokens == 9000


def test_without_a_config_the_teams_defaults_apply_and_a_dict_is_partial(make_memory, client_tenant):
    client_tenant.team.memory_config_defaults = {"threshold_tokens": 5000}
    client_tenant.team.save()

    plain = make_memory("managed_conversation")
    partial = make_memory("managed_conversation", memory_config={"active_context": {"min_reduction_ratio": 0.5}})
    full = make_memory("managed_conversation", memory_config=ManagedMemoryConfig())

    assert plain.config == ManagedMemoryConfig(threshold_tokens=5000)
    assert partial.config.threshold_tokens == 5000
    assert partial.config.active_context.min_reduction_ratio == 0.5
    assert full.config == ManagedMemoryConfig()  # a dataclass is sent whole: its defaults win


@pytest.mark.parametrize(
    ("config", "path"),
    [
        (ManagedMemoryConfig(active_context=ActiveContextPolicyConfig(mode="magic")), "active_context.mode"),
        (ManagedMemoryConfig(threshold_tokens=0), "threshold_tokens"),
        (
            ManagedMemoryConfig(
                active_context=ActiveContextPolicyConfig(summarization=SummarizationConfig(grace_recent_messages="2"))
            ),
            "active_context.summarization.grace_recent_messages",
        ),
        ({"threshold": 5}, "threshold"),
        ({"active_context": {"summarization": {"output_tokens": 5}}}, "active_context.summarization.output_tokens"),
    ],
)
def test_a_config_the_server_refuses_is_a_memory_config_error_naming_the_path(make_memory, config, path):
    with pytest.raises(MemoryConfigError) as refused:
        make_memory("managed_conversation", memory_config=config)
    assert list(refused.value.fields) == [f"memory_config.{path}"]
    assert f"memory_config: {path}" in str(refused.value)
    assert refused.value.status_code == 400
    assert isinstance(refused.value, ValueError)
    assert not Session.objects.exists()


def test_a_config_that_is_not_a_config_is_a_type_error(make_memory):
    with pytest.raises(TypeError, match="ManagedMemoryConfig or a dict"):
        make_memory("managed_conversation", memory_config=["threshold_tokens", 5])


def test_attaching_with_a_config_merges_it_and_makes_the_session_managed(make_memory):
    plain = make_memory("conversation_history", "sys")
    attached = make_memory(
        "managed_conversation", session_id=plain.session_id, memory_config={"threshold_tokens": 2000}
    )

    session = Session.objects.get(pk=plain.session_id)
    assert (session.memory_type, session.compaction_threshold) == ("managed_conversation", 2000)
    assert session.memory_config["active_context"]["min_reduction_ratio"] == 0.4  # the rest kept
    assert attached.memory_type == "managed_conversation"
    assert attached.memory_module.memory_type == "managed_conversation"

    make_memory("managed_conversation", session_id=plain.session_id)  # no config: nothing changes
    assert Session.objects.get(pk=plain.session_id).compaction_threshold == 2000

    with pytest.raises(MemoryConfigError):
        make_memory("managed_conversation", session_id=plain.session_id, memory_config={"bogus": 1})
    assert Session.objects.get(pk=plain.session_id).compaction_threshold == 2000


def test_managed_memory_can_be_built_directly_with_marsys_arguments(server_url, client_tenant, caplog):
    with ManagedConversationMemory(
        ManagedMemoryConfig(threshold_tokens=3000),
        trigger_strategy=object(),
        description="sys",
        base_url=server_url,
        api_key=client_tenant.key,
    ) as memory:
        assert memory.config.threshold_tokens == 3000
        assert memory.retrieve_all() == [{"role": "system", "content": "sys"}]
    assert "trigger_strategy is ignored" in caplog.text
