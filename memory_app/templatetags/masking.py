"""Template filters showing text as memsite.masking allows: `{% load masking %}`, then
`{{ job.traceback|masked }}` for what a worker stored and `{{ hook.url|webhook_url:can_curate }}`."""

from __future__ import annotations

from django import template

from memsite.masking import mask_secrets, mask_url

register = template.Library()


@register.filter
def masked(text: object) -> object:
    """Worker output (a job's error or traceback, raw LLM output, a receiver's answer) with every
    secret masked. New rows are stored masked; rows stored before hold what the worker saw."""
    return mask_secrets(str(text)) if text else text


@register.filter
def webhook_url(url: str, full: bool) -> str:
    """A webhook's URL whole for a team admin (`full`), else with its credentials and query values
    masked: the receiver's tokens often travel there."""
    return url if full else mask_url(url)
