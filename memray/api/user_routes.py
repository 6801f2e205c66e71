"""Per-user views that are derived, not stored by the caller: the profile
(`GET /v1/users/{user_id}/profile`) and the Memory Doctor (`GET /v1/users/{user_id}/doctor`).

Both take the user's key or an admin key. `?repair=true` on the doctor is admin-only:
a repair changes the store from what the event log says (it re-writes, re-embeds,
expires and deletes rows), which is an operator's decision, while the check itself only
reads. `?refresh=true` on the profile rebuilds it now (with the LLM when configured).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from memray.api import schemas as s
from memray.api.auth import require_scope
from memray.api.deps import AsyncMem, Key
from memray.api.errors import ApiError
from memray.core.doctor import UserReport
from memray.core.profile import Profile

router = APIRouter()


@router.get("/v1/users/{user_id}/profile", response_model=Profile)
async def profile(user_id: s.UserIdPath, key: Key, memory: AsyncMem, refresh: bool = False) -> Any:
    require_scope(key, user_id)
    return await memory.profile(user_id, refresh=refresh)


@router.get("/v1/users/{user_id}/doctor", response_model=UserReport)
async def doctor(user_id: s.UserIdPath, key: Key, memory: AsyncMem, repair: bool = False) -> Any:
    require_scope(key, user_id)
    if repair and not key.admin:
        raise ApiError(403, "forbidden", "repair needs an admin key")
    report = await memory.doctor(user_id, repair=repair)
    done = report.after if report.after is not None else report.users
    return done[0]
