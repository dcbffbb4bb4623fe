"""Per-pod scratch space shared by the plugins of one scheduling cycle."""

from __future__ import annotations

from typing import Any, TypeVar

from kubesched.api import Pod
from kubesched.framework._node_info import PodInfo

T = TypeVar("T")


class CycleState:
    """What a plugin computes in PreFilter or PreScore and reads again in Filter or Score.

    Keys are conventionally the plugin's name plus a suffix (``"PreFilterNodeResourcesFit"``).
    ``skip_filter_plugins`` and ``skip_score_plugins`` hold the plugins whose PreFilter or PreScore
    returned Skip: the runtime does not call their Filter or Score for this pod.
    """

    __slots__ = (
        "_cycle_only",
        "_data",
        "pod_info",
        "record_plugin_metrics",
        "skip_filter_plugins",
        "skip_score_plugins",
    )

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        # Keys no plugin reads after the scheduling cycle (see end_scheduling_cycle).
        self._cycle_only: list[str] = []
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        #: Whether the runtime times each plugin of this cycle (``ShouldRecordPluginMetrics``);
        #: the scheduling loop samples a share of its cycles, as kube-scheduler does.
        self.record_plugin_metrics = True
        #: What was derived from the cycle's pod once (see :meth:`pod_info_of`).
        self.pod_info: PodInfo | None = None

    def write(self, key: str, value: object) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T:
        """The value under ``key``; ``KeyError`` if a PreFilter did not write it."""
        value = self._data[key]
        if not isinstance(value, kind):
            raise TypeError(
                f"cycle state {key!r} holds {type(value).__name__}, not {kind.__name__}"
            )
        return value

    def pod_info_of(self, pod: Pod) -> PodInfo:
        """The requests and host ports of ``pod``, derived once per cycle and shared by the
        plugins (kube-scheduler's plugins read them from the ``PodInfo`` they are given).

        The scheduling loop sets :attr:`pod_info` to the PodInfo the queue derived when it
        queued the pod; without it (or for another pod) it is derived here.
        """
        info = self.pod_info
        if info is None or info.pod is not pod:
            info = self.pod_info = PodInfo.of(pod)
        return info

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def count(self) -> int:
        """How many keys the state holds."""
        return len(self._data)

    def keys_since(self, count: int) -> list[str]:
        """The keys written after the state held ``count`` of them (:meth:`count` then)."""
        return list(self._data)[count:] if len(self._data) > count else []

    def scheduling_cycle_only(self, keys: list[str]) -> None:
        """Mark ``keys`` as read in the scheduling cycle only (by plugins with no Reserve,
        Permit, PreBind, Bind or PostBind)."""
        self._cycle_only.extend(keys)

    def end_scheduling_cycle(self) -> None:
        """Drop what only the scheduling cycle reads. The binding cycle keeps the state until
        the API server has bound the pod, and pods scheduled faster than they are bound pile up
        there: a vectorized PreFilter state is arrays over every node (80 KB per pod at 5,000
        nodes for pod anti-affinity)."""
        for key in self._cycle_only:
            self._data.pop(key, None)
        self._cycle_only.clear()

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        """A shallow copy; values that preemption mutates implement ``clone()`` themselves."""
        c = CycleState()
        c._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        c.skip_filter_plugins = set(self.skip_filter_plugins)
        c.skip_score_plugins = set(self.skip_score_plugins)
        c.record_plugin_metrics = self.record_plugin_metrics
        c.pod_info = self.pod_info
        c._cycle_only = list(self._cycle_only)
        return c
