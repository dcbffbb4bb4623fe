"""Registry authorizations (Bearer tokens, Basic answers) kept until they expire.

A token is scoped to a repository and an action; one that answered a registry's challenge for a
user is sent again for that registry, scope and user until shortly before its stated expiry.
"""

from __future__ import annotations

import base64
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubesched.plugins.image_compatibility._credentials import Credential

#: A token is renewed this long before the expiry its issuer stated.
TOKEN_EXPIRY_MARGIN = 5.0
#: Token lifetime when the issuer states none (the distribution token spec's default).
DEFAULT_TOKEN_SECONDS = 60.0
#: Authorizations kept at most (expired ones are dropped first when it is reached).
MAX_AUTHORIZATIONS = 1024


@dataclass(frozen=True)
class Authorization:
    """An ``Authorization`` header and when it stops being sent (on the cache's clock)."""

    header: str
    expires: float


def basic_authorization(user: Credential) -> Authorization:
    """HTTP Basic for ``user``; it does not expire."""
    pair = base64.b64encode(f"{user.username}:{user.password}".encode()).decode()
    return Authorization(f"Basic {pair}", math.inf)


class TokenCache:
    """What answered a registry's challenge, by (registry, scope, user; None: anonymous)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, limit: int = MAX_AUTHORIZATIONS
    ) -> None:
        self._clock = clock
        self._limit = limit
        self._entries: dict[tuple[str, str, Credential | None], Authorization] = {}

    def bearer(self, token: str, expires_in: object) -> Authorization:
        """A token service's token; ``expires_in`` as its JSON states it (seconds, or absent)."""
        seconds = DEFAULT_TOKEN_SECONDS
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            seconds = float(expires_in) if expires_in > 0 else seconds
        expires = self._clock() + max(seconds - TOKEN_EXPIRY_MARGIN, 0.0)
        return Authorization(f"Bearer {token}", expires)

    def lookup(self, registry: str, scope: str, users: Sequence[Credential]) -> str | None:
        """A still valid header that worked before for one of ``users``, or anonymously."""
        now = self._clock()
        for user in [*users, None]:
            cached = self._entries.get((registry, scope, user))
            if cached is not None and cached.expires > now:
                return cached.header
        return None

    def remember(
        self, registry: str, scope: str, user: Credential | None, authorization: Authorization
    ) -> None:
        if len(self._entries) >= self._limit:
            now = self._clock()
            for stale in [k for k, a in self._entries.items() if a.expires <= now]:
                del self._entries[stale]
            if len(self._entries) >= self._limit:
                self._entries.clear()  # a burst of live ones: start over, tokens renew
        self._entries[(registry, scope, user)] = authorization
