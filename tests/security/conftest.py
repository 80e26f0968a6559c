"""Collection fix-up for the schemathesis tests."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # pytest 9.2 builds a Function's node id from `originalname` and its callspec only, and
    # schemathesis 4.32 passes the bare test name there: every operation's item would share one
    # id ("test_x" for all 67). Put the operation back ("test_x[GET /api/v1/sessions/]") so
    # reports, -k, --deselect and --lf tell the operations apart.
    for item in items:
        label = getattr(item, "operation_label", None)
        if label and f"[{label}]" not in item.nodeid:
            item._id = item._id.with_params(label)
