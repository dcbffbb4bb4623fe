"""Async access to kube-apiserver for the scheduler.

* :class:`APIClient`: raw paths, bytes or ``msgspec`` structs, qps/burst rate limiting, errors
  mapped onto :class:`APIError` subclasses that say whether a retry may help
  (:func:`with_retries`). Built from a kubeconfig, ``$KUBECONFIG`` or the in-cluster service
  account by :meth:`APIClient.from_kubeconfig`.
* :class:`Reflector`: list then watch one resource type into a :class:`Store`, calling an
  :class:`EventHandler`; re-lists and reconciles after 410 Gone.
* :func:`bind`: the DefaultBinder's ``pods/binding`` POST with a UID precondition;
  :func:`get_secret`: one Secret (a pod's imagePullSecret), ``None`` if absent;
  :class:`PluginAPIClient`: those and custom objects, as the framework's client for plugins.
  :func:`patch_custom_object_status`: a custom object's status (Coscheduling's PodGroups).
* :class:`EventRecorder`: ``events.k8s.io/v1`` events, queued and aggregated into series;
  :func:`update_pod_condition`: the ``PodScheduled`` condition and nominated node.
* :class:`LeaderElector`: leader election on a Lease with client-go's semantics.
"""

from kubesched.kube._binding import bind
from kubesched.kube._client import (
    DEFAULT_BURST,
    DEFAULT_QPS,
    APIClient,
    KubeConfigError,
    PatchType,
    api_path,
    decoder_for,
    load_kubeconfig,
)
from kubesched.kube._custom_objects import patch_custom_object_status
from kubesched.kube._errors import (
    AlreadyExists,
    APIConnectionError,
    APIError,
    Backoff,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    ServerTimeout,
    Status,
    StatusDetails,
    TemporaryAPIError,
    TooManyRequests,
    Unauthorized,
    error_from_response,
    error_from_status,
    with_retries,
)
from kubesched.kube._events import (
    ACTION_BINDING,
    ACTION_PREEMPTING,
    ACTION_SCHEDULING,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    EventRecorder,
    EventSeries,
    EventV1,
    ObjectReference,
    object_reference,
    truncate_message,
    update_pod_condition,
)
from kubesched.kube._http1 import ConnectionPool, TransportError
from kubesched.kube._leader import LeaderElectionRecord, LeaderElector, default_identity
from kubesched.kube._plugin_client import PluginAPIClient
from kubesched.kube._ratelimit import TokenBucket
from kubesched.kube._reflector import (
    EventHandler,
    KubeObject,
    ReconcileResult,
    Reflector,
    ResourceEventHandler,
    Store,
    object_key,
    reconcile,
)
from kubesched.kube._secrets import get_secret

__all__ = [
    "ACTION_BINDING",
    "ACTION_PREEMPTING",
    "ACTION_SCHEDULING",
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "APIClient",
    "APIConnectionError",
    "APIError",
    "AlreadyExists",
    "Backoff",
    "BadRequest",
    "Conflict",
    "ConnectionPool",
    "EventHandler",
    "EventRecorder",
    "EventSeries",
    "EventV1",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeConfigError",
    "KubeObject",
    "LeaderElectionRecord",
    "LeaderElector",
    "NotFound",
    "ObjectReference",
    "PatchType",
    "PluginAPIClient",
    "ReconcileResult",
    "Reflector",
    "ResourceEventHandler",
    "ServerError",
    "ServerTimeout",
    "Status",
    "StatusDetails",
    "Store",
    "TemporaryAPIError",
    "TokenBucket",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "api_path",
    "bind",
    "decoder_for",
    "default_identity",
    "error_from_response",
    "error_from_status",
    "get_secret",
    "load_kubeconfig",
    "object_key",
    "object_reference",
    "patch_custom_object_status",
    "reconcile",
    "truncate_message",
    "update_pod_condition",
    "with_retries",
]
