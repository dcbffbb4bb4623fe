"""The token cache: what it hands out again, until when, and what it drops when full."""

from __future__ import annotations

import math

from kubesched.plugins.image_compatibility._credentials import Credential
from kubesched.plugins.image_compatibility._tokens import (
    Authorization,
    TokenCache,
    basic_authorization,
)

ALICE = Credential("r.io", "alice", "pw")
BOB = Credential("r.io", "bob", "pw")
SCOPE = "repository:team/app:pull"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_bearer_expires_before_its_stated_lifetime() -> None:
    clock = Clock()
    tokens = TokenCache(clock=clock)
    assert tokens.bearer("t", 300) == Authorization("Bearer t", 1295.0)
    # No (or a senseless) lifetime: the token spec's 60 s default.
    for stated in (None, 0, -5, True, "300"):
        assert tokens.bearer("t", stated).expires == 1055.0
    assert tokens.bearer("t", 2).expires == 1000.0  # under the margin: never reused


def test_basic_never_expires() -> None:
    answer = basic_authorization(ALICE)
    assert answer == Authorization("Basic YWxpY2U6cHc=", math.inf)


def test_lookup_by_registry_scope_and_user_until_expiry() -> None:
    clock = Clock()
    tokens = TokenCache(clock=clock)
    tokens.remember("r.io", SCOPE, ALICE, tokens.bearer("a", 60))
    assert tokens.lookup("r.io", SCOPE, [ALICE]) == "Bearer a"
    assert tokens.lookup("r.io", SCOPE, [BOB]) is None
    assert tokens.lookup("r.io", "repository:other:pull", [ALICE]) is None
    assert tokens.lookup("s.io", SCOPE, [ALICE]) is None
    tokens.remember("r.io", SCOPE, None, tokens.bearer("anon", 60))
    assert tokens.lookup("r.io", SCOPE, [BOB]) == "Bearer anon"  # anonymous serves anyone
    assert tokens.lookup("r.io", SCOPE, [ALICE]) == "Bearer a"  # a user's own token first
    clock.now += 55
    assert tokens.lookup("r.io", SCOPE, [ALICE]) is None


def test_a_full_cache_drops_expired_entries_then_everything() -> None:
    clock = Clock()
    tokens = TokenCache(clock=clock, limit=2)
    tokens.remember("r.io", SCOPE, ALICE, Authorization("Bearer old", clock.now))  # expired
    tokens.remember("r.io", SCOPE, BOB, Authorization("Bearer b", math.inf))
    tokens.remember("s.io", SCOPE, ALICE, Authorization("Bearer s", math.inf))
    assert tokens.lookup("r.io", SCOPE, [BOB]) == "Bearer b"
    assert tokens.lookup("s.io", SCOPE, [ALICE]) == "Bearer s"
    tokens.remember("t.io", SCOPE, ALICE, Authorization("Bearer t", math.inf))
    assert tokens.lookup("r.io", SCOPE, [BOB]) is None
    assert tokens.lookup("s.io", SCOPE, [ALICE]) is None
    assert tokens.lookup("t.io", SCOPE, [ALICE]) == "Bearer t"
