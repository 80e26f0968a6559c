"""What the server shows of its own secrets: `mask_secrets` masks every configured secret (keys,
tokens, the passwords inside service URLs) and secret-shaped text wherever worker output or a log
line may quote it; `mask_url` is what a non-admin sees of a URL that may carry tokens."""

from __future__ import annotations

import re

import pytest
from django.conf import settings as django_settings

from memsite.masking import REDACTED, mask_secrets, mask_url

CANARY = "CANARYsecret-4d1e7a90"
# A setting whose name ends like this holds a secret: every one must be masked (a new one too).
SECRET_NAME = re.compile(r"(KEY|SECRET|TOKEN|PASSWORD)$")


def setting_names_like_secrets() -> list[str]:
    """Text settings whose names end like a secret's (not counts such as SSE_MAX_STREAMS_PER_KEY)."""
    return sorted(
        name
        for name in dir(django_settings)
        if SECRET_NAME.search(name) and not name.startswith("_") and isinstance(getattr(django_settings, name), str)
    )


def test_the_secret_settings_found_include_the_llm_embeddings_and_signing_keys() -> None:
    assert {"LLM_API_KEY", "EMBEDDINGS_API_KEY", "SECRET_KEY", "API_KEY_HMAC_SECRET", "METRICS_TOKEN"} <= set(
        setting_names_like_secrets()
    )


@pytest.mark.parametrize("name", setting_names_like_secrets())
def test_every_setting_named_like_a_secret_is_masked(settings, name: str) -> None:
    setattr(settings, name, CANARY)
    shown = mask_secrets(f"upstream said: Incorrect API key provided: {CANARY}.")
    assert CANARY not in shown
    assert shown == f"upstream said: Incorrect API key provided: {REDACTED}."


def test_rotated_secret_keys_are_masked_too(settings) -> None:
    settings.SECRET_KEY_FALLBACKS = [CANARY]
    assert mask_secrets(f"signed with {CANARY}") == f"signed with {REDACTED}"


@pytest.mark.parametrize(
    ("name", "url"),
    [
        ("DATABASE_URL", "postgres://memsite:{pw}@db.internal:5432/memsite"),
        ("REDIS_URL", "redis://:{pw}@cache.internal:6379/0"),
        ("CELERY_BROKER_URL", "amqp://worker:{pw}@mq.internal:5672//"),
        ("CELERY_RESULT_BACKEND", "redis://:{pw}@results.internal:6379/1"),
        ("LLM_BASE_URL", "https://proxy:{pw}@llm.internal/v1"),
        ("EMBEDDINGS_BASE_URL", "https://proxy:{pw}@embed.internal/v1"),
    ],
)
def test_the_password_of_a_service_url_is_masked_even_without_its_url(settings, name: str, url: str) -> None:
    setattr(settings, name, url.format(pw=CANARY))
    # A driver's error quotes the password alone, or the whole URL.
    assert mask_secrets(f"auth failed with password {CANARY}") == f"auth failed with password {REDACTED}"
    assert CANARY not in mask_secrets(f"cannot reach {url.format(pw=CANARY)}")


def test_a_percent_encoded_password_is_masked_as_written_and_as_decoded(settings) -> None:
    settings.DATABASE_URL = "postgres://memsite:p%40ss-CANARY-91c2@db.internal/memsite"
    shown = mask_secrets("tried p%40ss-CANARY-91c2, then p@ss-CANARY-91c2")
    assert "CANARY" not in shown and shown.count(REDACTED) == 2


# Only the masking reads the added alias; the connections in use keep their own copy.
@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_the_database_password_is_masked_when_set_without_a_url(settings) -> None:
    settings.DATABASES = {**settings.DATABASES, "replica": {"PASSWORD": CANARY}}
    assert mask_secrets(f"FATAL: password {CANARY} rejected") == f"FATAL: password {REDACTED} rejected"


def test_webhook_secrets_and_api_keys_are_masked_by_their_shape_and_hints_are_kept() -> None:
    secret = "whsec_" + "Qx7-w2_Lm9" * 4
    api_key = "msk_" + "AbCd3fGh" * 5
    shown = mask_secrets(f"signed with {secret}, called with {api_key}; hint whsec_Qx7-w…")
    assert secret not in shown and api_key not in shown
    assert "hint whsec_Qx7-w…" in shown


def test_credentials_in_any_url_and_bearer_tokens_are_masked() -> None:
    shown = mask_secrets("POST https://bob:hunter2hunter2@hooks.example.com/in with Authorization: Bearer abc123def456")
    assert "hunter2" not in shown and "abc123def456" not in shown
    assert f"https://{REDACTED}@hooks.example.com/in" in shown


def test_ordinary_words_after_token_and_basic_stay_readable() -> None:
    text = '[{"subject": "billing", "predicate": "uses", "object": "token accounting"}] basic understanding'
    assert mask_secrets(text) == text
    assert mask_secrets("Authorization: Token 9944b09199c62bcf9418ad846dd0e4bb") == f"Authorization: Token {REDACTED}"
    assert mask_secrets("Authorization: Basic dXNlcjpwYXNzd29yZA==") == f"Authorization: Basic {REDACTED}"


def test_short_secrets_are_not_masked_inside_ordinary_words(settings) -> None:
    settings.LLM_API_KEY = "sk-1"  # too short to tell from text: masking it would garble every "sk-1..."
    assert mask_secrets("task-1 ran") == "task-1 ran"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://hooks.example.com/in", "https://hooks.example.com/in"),
        (
            "https://user:pw@hooks.example.com:8443/in?token=abc123&team=ops",
            f"https://{REDACTED}@hooks.example.com:8443/in?token={REDACTED}&team={REDACTED}",
        ),
        ("https://hooks.example.com/in?Zq81token", f"https://hooks.example.com/in?{REDACTED}"),
        ("https://hooks.example.com/in#secret-part", f"https://hooks.example.com/in#{REDACTED}"),
        ("http://[2001:db8::1]:9/h?k=v", f"http://[2001:db8::1]:9/h?k={REDACTED}"),
    ],
)
def test_a_url_shown_masked_keeps_scheme_host_and_path(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_a_url_that_cannot_be_parsed_is_masked_whole() -> None:
    assert mask_url("http://[::1/h?token=abc") == REDACTED
