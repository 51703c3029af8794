"""API keys, the audit log and shadow comparisons behave the same on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest

from reasoning_service.errors import ConflictError, NotFoundError
from reasoning_service.store.audit import AuditEntry, list_audit, record_audit
from reasoning_service.store.comparisons import ShadowComparison, list_comparisons, save_comparisons
from reasoning_service.store.keys import (
    create_api_key,
    find_api_key,
    list_api_keys,
    revoke_api_key,
    rotate_api_key,
)

NOW = dt.datetime.now(dt.UTC)


async def test_a_key_is_found_until_revoked_and_rotation_replaces_its_secret(store):
    key, plaintext = await create_api_key(store, admin=True, label="ops")
    assert (await find_api_key(store, plaintext)).admin is True
    assert await find_api_key(store, plaintext + "x") is None

    rotated, new_plaintext = await rotate_api_key(store, key.key_id)
    assert rotated.key_id == key.key_id and rotated.rotated_at is not None
    assert await find_api_key(store, plaintext) is None
    assert (await find_api_key(store, new_plaintext)).key_id == key.key_id

    await revoke_api_key(store, key.key_id)
    assert await find_api_key(store, new_plaintext) is None
    with pytest.raises(ConflictError):
        await rotate_api_key(store, key.key_id)
    with pytest.raises(NotFoundError):
        await revoke_api_key(store, "nope")
    assert [k.key_id for k in await list_api_keys(store)] == [key.key_id]
    assert await list_api_keys(store, include_revoked=False) == []


async def test_an_expired_key_is_not_found(store):
    _, plaintext = await create_api_key(store, expires_in_days=-1)
    assert await find_api_key(store, plaintext) is None


async def test_the_audit_log_lists_newest_first(store):
    for action in ("evaluation.create", "evaluation.read", "policy.create"):
        entry = AuditEntry(at=NOW, key_id="k1", action=action, outcome="ok", status_code=200)
        await record_audit(store, entry)
    listed = await list_audit(store, limit=2)
    assert [e.action for e in listed] == ["policy.create", "evaluation.read"]


async def test_shadow_comparisons_are_read_by_time_window(store):
    def comparison(n: int, at: dt.datetime) -> ShadowComparison:
        return ShadowComparison(
            comparison_id=f"c{n}",
            evaluation_id="e",
            criterion_id="C1",
            created_at=at,
            control_controller="heuristic",
            control_status="met",
            candidate_status="met",
            agree=True,
        )

    old = NOW - dt.timedelta(days=3)
    await save_comparisons(store, [comparison(1, old), comparison(2, NOW)])
    window = await list_comparisons(store, since=NOW - dt.timedelta(hours=1))
    assert [(c.comparison_id, c.agree) for c in window] == [("c2", True)]
