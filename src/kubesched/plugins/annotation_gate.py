"""AnnotationGate: refuse pods that carry certain annotations.

An example of a plugin written outside kube-scheduler's plugin set, the way another package would
write one: only kubesched's public API, its own args type, registered through the
``kubesched.plugins`` entry point. What it does and the walk-through:
docs/plugins/annotation-gate.md.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched.api import Pod, is_label_key
from kubesched.config import FieldError, decode_args
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    Nodes,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
)

NAME = "AnnotationGate"

#: The annotation keys rejected when the args do not say otherwise.
DEFAULT_ANNOTATIONS = ("mycompany.com/environment",)

#: The PreFilter reason; ``{key}`` is the first configured annotation the pod carries.
ERR_REASON_ANNOTATED = 'pod has annotation "{key}", which this scheduler does not admit'


class AnnotationGateArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``AnnotationGate``.

    ``annotations``: the annotation keys that make a pod unwelcome (any value). Each must be a
    valid annotation key (``[prefix/]name``, as label keys). An empty list admits every pod.
    """

    annotations: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_ANNOTATIONS))

    def validate(self, path: str) -> list[FieldError]:
        """Problems with the args, named by field path (called by ``decode_args``)."""
        errors: list[FieldError] = []
        seen: set[str] = set()
        for i, key in enumerate(self.annotations):
            p = f"{path}.annotations[{i}]"
            if not is_label_key(key):
                errors.append(
                    FieldError.invalid(p, key, "must be a valid annotation key ([prefix/]name)")
                )
            elif key in seen:
                errors.append(FieldError.duplicate(p, key))
            seen.add(key)
        return errors


class AnnotationGate(PreFilterPlugin, EnqueueExtensions):
    """Rejects, at PreFilter, pods carrying any of the configured annotation keys."""

    name = NAME
    args_type = AnnotationGateArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        # ``args`` is this plugin's pluginConfig entry as written (a mapping), already typed
        # args, or None for defaults; decode_args decodes strictly and calls validate().
        decoded = decode_args(AnnotationGateArgs, args)
        super().__init__(handle, decoded)
        self.annotations: tuple[str, ...] = tuple(decoded.annotations)

    def gating_annotation(self, pod: Pod) -> str | None:
        """The first configured annotation key ``pod`` carries, if any."""
        present = pod.metadata.annotations
        return next((key for key in self.annotations if key in present), None)

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        key = self.gating_annotation(pod)
        if key is None:
            return None, None
        return None, Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ANNOTATED.format(key=key)
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Annotations change by pod updates; only the pod's own update can admit it.
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE), self.is_schedulable_after_pod_update
            )
        ]

    def is_schedulable_after_pod_update(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when this very pod no longer carries any of the annotations."""
        if not isinstance(new, Pod):  # not a pod update: be safe
            return QueueingHint.QUEUE
        if new.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        return QueueingHint.SKIP if self.gating_annotation(new) else QueueingHint.QUEUE
