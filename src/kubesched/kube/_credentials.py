"""The ``Authorization`` header of API requests, from what the kubeconfig says.

Fixed (a bearer token, basic auth), none (client certificates do it), a token file read again
on 401 (a rotated service-account token, as client-go's ``tokenFileAuth``), or an exec
credential plugin (run by lightkube) whose token is cached until its ``expirationTimestamp``
and renewed on 401, as client-go's exec authenticator does.
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

__all__ = ["Credentials", "ExecToken", "run_exec_plugin"]


class ExecToken:
    """A token from an exec credential plugin and when it expires (``None``: never)."""

    __slots__ = ("expires", "token")

    def __init__(self, token: str, expires: datetime.datetime | None) -> None:
        self.token = token
        self.expires = expires


def run_exec_plugin(user_exec: Any) -> Callable[[], Awaitable[ExecToken]]:
    """A function that runs the kubeconfig's ``users[].user.exec`` plugin (lightkube's
    ``UserExec``) through lightkube and reads its ``ExecCredential``."""
    from lightkube.config.client_adapter import (  # noqa: PLC0415  (import is slow)
        ExecAuth,
        async_check_output,
    )
    from lightkube.core.exceptions import ConfigError  # noqa: PLC0415

    async def run() -> ExecToken:
        try:
            # ExecAuth checks the apiVersion and builds the command and its environment.
            command, env = ExecAuth(user_exec)._prepare()
            output = await async_check_output(command, env=env)
        except ConfigError as exc:
            raise ValueError(f"exec credential plugin: {exc}") from exc
        return parse_exec_credential(output)

    return run


def parse_exec_credential(output: bytes) -> ExecToken:
    """The token and expiry of an ``ExecCredential`` a plugin printed."""
    try:
        status = json.loads(output)["status"]
        token = status["token"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"exec credential plugin: no status.token in its output: {exc}") from exc
    if not isinstance(token, str) or not token:
        raise ValueError("exec credential plugin: status.token is empty")
    expires = None
    if stamp := status.get("expirationTimestamp"):
        try:
            expires = datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(
                f"exec credential plugin: status.expirationTimestamp {stamp!r}: {exc}"
            ) from exc
        if expires.tzinfo is None:
            expires = expires.replace(tzinfo=datetime.UTC)
    return ExecToken(token, expires)


class Credentials:
    """The ``Authorization`` header of every request (:attr:`header`), renewed as the source
    of the credentials allows: ``token_file`` is read again, ``exec_plugin`` run again."""

    def __init__(
        self,
        header: str | None = None,
        *,
        token_file: str | None = None,
        exec_plugin: Callable[[], Awaitable[ExecToken]] | None = None,
        now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self._token_file = token_file
        self._exec = exec_plugin
        self._expires: datetime.datetime | None = None
        self._now = now
        self._lock = asyncio.Lock()
        self.header = header
        if token_file is not None:
            self._read_token_file()

    async def authorization(self) -> str | None:
        """The header to send now: an exec plugin's token is fetched first if there is none
        yet or it has expired."""
        if self._exec is not None and (
            self.header is None or (self._expires is not None and self._now() >= self._expires)
        ):
            await self.renew(self.header)
        return self.header

    async def renew(self, used: str | None) -> bool:
        """The server refused ``used`` (401): read the token file or run the plugin again,
        unless another request already did; whether the header is now another."""
        if self._exec is not None:
            async with self._lock:
                if self.header == used:
                    token = await self._exec()
                    self.header, self._expires = f"Bearer {token.token}", token.expires
        elif self._token_file is not None:
            self._read_token_file()
        return self.header != used

    def _read_token_file(self) -> None:
        assert self._token_file is not None
        try:
            token = Path(self._token_file).read_text().strip()
        except OSError as exc:
            raise OSError(f"cannot read token file {self._token_file}: {exc}") from exc
        self.header = f"Bearer {token}"
