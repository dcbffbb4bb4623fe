"""The result of running a plugin: a :class:`Code` plus the reasons a user reads.

As in kube-scheduler, ``None`` is success: plugins return ``None`` when all is well and a
:class:`Status` only to say something else.
"""

from __future__ import annotations

import enum

_set = object.__setattr__


class Code(enum.IntEnum):
    """kube-scheduler's status codes, in its order."""

    #: The plugin ran and the pod may proceed.
    SUCCESS = 0
    #: An internal error, not a property of the pod or node: the pod is retried with backoff.
    ERROR = 1
    #: The pod does not fit now; preemption (PostFilter) may make room.
    UNSCHEDULABLE = 2
    #: The pod does not fit and preempting pods on the node would not change that.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    #: Permit only: hold the pod until allowed, rejected or timed out.
    WAIT = 4
    #: The plugin has nothing to do for this pod (PreFilter, PreScore, Bind, ...).
    SKIP = 5
    #: The pod waits for something outside the scheduler (e.g. a volume being provisioned).
    PENDING = 6

    @property
    def label(self) -> str:
        """The name kube-scheduler prints: ``Success``, ``UnschedulableAndUnresolvable``, ..."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class Status:
    """A non-success outcome with reasons, and the plugin that produced it.

    Reasons are the short strings kube-scheduler aggregates into its FailedScheduling message
    (``Insufficient cpu``, ``node(s) didn't match Pod's node affinity/selector``).
    """

    __slots__ = ("code", "error", "plugin", "reasons")

    code: Code
    reasons: tuple[str, ...]
    plugin: str
    error: BaseException | None

    def __init__(
        self,
        code: Code,
        *reasons: str,
        plugin: str = "",
        error: BaseException | None = None,
    ) -> None:
        # Frozen: one Status is shared by many nodes and used as a dict key.
        _set(self, "code", code)
        _set(self, "reasons", reasons)
        _set(self, "plugin", plugin)
        _set(self, "error", error)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Status is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Status is immutable: cannot delete {name!r}")

    @classmethod
    def as_error(cls, error: BaseException, plugin: str = "") -> Status:
        """An ``Error`` status carrying the exception."""
        return cls(Code.ERROR, str(error) or type(error).__name__, plugin=plugin, error=error)

    @classmethod
    def raised(cls, error: BaseException, plugin: str = "") -> Status:
        """An ``Error`` status for an exception nobody expected (a plugin's bug): its type
        leads the message, since a bare exception text (a ``KeyError``'s key) says little."""
        return cls(Code.ERROR, f"{type(error).__name__}: {error}", plugin=plugin, error=error)

    def wrapped(self, context: str, plugin: str = "") -> Status:
        """This status's error as the framework reports it: an ``Error`` reading
        ``<context>: <message>`` (``AsStatus(fmt.Errorf("<context>: %w", err))``)."""
        return Status(
            Code.ERROR, f"{context}: {self.message}", plugin=plugin or self.plugin, error=self.error
        )

    @property
    def message(self) -> str:
        """Reasons joined by ``", "``, as ``Status.Message()``."""
        return ", ".join(self.reasons)

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (``IsRejected``)."""
        return self.code in _REJECTED

    def with_plugin(self, plugin: str) -> Status:
        """This status attributed to ``plugin``: itself if it names a plugin already, else a copy
        that names ``plugin``."""
        if self.plugin:
            return self
        return Status(self.code, *self.reasons, plugin=plugin, error=self.error)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, self.plugin) == (other.code, other.reasons, other.plugin)

    def __hash__(self) -> int:
        return hash((self.code, self.reasons, self.plugin))

    def __repr__(self) -> str:
        who = f" by {self.plugin}" if self.plugin else ""
        return f"Status({self.code.label}{who}: {self.message!r})"


#: The Skip status (the plugin has nothing to do for this pod): immutable, so one serves every call.
SKIP = Status(Code.SKIP)

_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


def go_quote(s: str) -> str:
    """Go's ``%q`` for plain names (plugin names in the framework's messages)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def is_success(status: Status | None) -> bool:
    """``None`` or a Success status."""
    return status is None or status.code == Code.SUCCESS
