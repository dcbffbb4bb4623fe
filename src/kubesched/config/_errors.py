"""Field errors in the style of Kubernetes' ``field.ErrorList``, and the exception carrying them.

kube-scheduler reports every problem in a configuration as ``<path>: <kind of error>: <detail>``,
where the path names the field exactly as written in the file (``profiles[1].schedulerName``,
``profiles[0].pluginConfig[2].args.scoringStrategy.resources[0].weight``). It collects all of them
instead of stopping at the first, so a user can fix a file in one pass. This module reproduces that
shape: :class:`FieldError` is one ``(path, message)`` pair, and its constructors build the
message bodies Kubernetes uses (``Invalid value: 0: must be greater than 0``,
``Required value``, ``Duplicate value: "x"``, ``Unsupported value: "Foo": supported values: ...``,
``Forbidden: ...``). :class:`ConfigError` carries the list.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from kubesched import KubeschedError
from kubesched.config._duration import Seconds


def format_value(value: Any) -> str:
    """Render a value the way Kubernetes prints it inside a field error.

    Strings are quoted (``"leases"``), booleans are ``true``/``false``, numbers are bare, ``None``
    is ``null``, and lists or mappings are compact JSON. A value that knows how to show itself
    (for example a duration, shown as ``10s``) is printed with :func:`str`.
    """
    if value is None:
        return "null"
    if isinstance(value, Seconds):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple, dict)):
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError):
            return repr(value)
    return str(value)


class FieldError(NamedTuple):
    """One problem in a configuration: the field's path and what is wrong with it.

    ``path`` is written the way kube-scheduler writes it: dotted field names in their JSON
    spelling with ``[i]`` for list positions, relative to the top of the document
    (``profiles[0].plugins.score.enabled[1].weight``). It is empty for a problem with the document
    as a whole (a file that cannot be read, YAML that does not parse). ``message`` is the rest of
    the line, for example ``Invalid value: -1: must be non-negative``.

    Being a named tuple, a ``FieldError`` compares and unpacks like a ``(path, message)`` pair.
    The class methods build messages with Kubernetes' wording; plugins outside this package can
    use them in their own args validation so every error reads the same.
    """

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        """``<path>: Invalid value: <value>: <detail>`` (Kubernetes ``field.Invalid``)."""
        body = f"Invalid value: {format_value(value)}"
        return cls(path, f"{body}: {detail}" if detail else body)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        """``<path>: Required value`` (Kubernetes ``field.Required``)."""
        return cls(path, f"Required value: {detail}" if detail else "Required value")

    @classmethod
    def duplicate(cls, path: str, value: Any) -> FieldError:
        """``<path>: Duplicate value: <value>`` (Kubernetes ``field.Duplicate``)."""
        return cls(path, f"Duplicate value: {format_value(value)}")

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> FieldError:
        """``<path>: Unsupported value: <value>: supported values: "a", "b"``."""
        choices = ", ".join(format_value(s) for s in supported)
        return cls(path, f"Unsupported value: {format_value(value)}: supported values: {choices}")

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        """``<path>: Forbidden: <detail>`` (Kubernetes ``field.Forbidden``)."""
        return cls(path, f"Forbidden: {detail}")


def child(path: str, name: str) -> str:
    """The path of field ``name`` inside the object at ``path`` (``a.b`` + ``c`` → ``a.b.c``)."""
    return f"{path}.{name}" if path else name


def index(path: str, i: int) -> str:
    """The path of item ``i`` of the list at ``path`` (``a.b`` + ``2`` → ``a.b[2]``)."""
    return f"{path}[{i}]"


class ConfigError(KubeschedError):
    """A configuration that cannot be used, with every problem found in it.

    ``errors`` holds :class:`FieldError` values, each a ``(path, message)`` pair; ``source`` names
    where the configuration came from (a file path) when that is known. ``str()`` gives one line
    per problem::

        /etc/kubesched/config.yaml: 2 errors:
          profiles[1].schedulerName: Duplicate value: "batch"
          parallelism: Invalid value: 0: should be an integer value greater than zero
    """

    errors: tuple[FieldError, ...]
    source: str | None

    def __init__(
        self, errors: Iterable[FieldError | tuple[str, str]], *, source: str | None = None
    ) -> None:
        self.errors = tuple(e if isinstance(e, FieldError) else FieldError(*e) for e in errors)
        self.source = source
        super().__init__(str(self))

    def with_source(self, source: str) -> ConfigError:
        """The same errors, attributed to ``source`` (kept if one was already set)."""
        return ConfigError(self.errors, source=self.source or source)

    def __str__(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        if not self.errors:
            return f"{prefix}invalid configuration"
        if len(self.errors) == 1:
            return f"{prefix}{self.errors[0]}"
        lines = [f"{prefix}{len(self.errors)} errors:"]
        lines.extend(f"  {e}" for e in self.errors)
        return "\n".join(lines)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_config_error, (self.errors, self.source))


def _rebuild_config_error(errors: tuple[FieldError, ...], source: str | None) -> ConfigError:
    return ConfigError(errors, source=source)
