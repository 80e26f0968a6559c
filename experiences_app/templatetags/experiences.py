"""Template filters of the experience pages."""

from __future__ import annotations

from django import template

from experiences_app.models import Experience
from experiences_app.selectors import ServingState, serving_state

register = template.Library()


@register.filter(name="serving_state")
def serving_state_filter(experience: Experience) -> ServingState:
    """`{% with state=exp|serving_state %}`: the experience's state as selection sees it."""
    return serving_state(experience)
