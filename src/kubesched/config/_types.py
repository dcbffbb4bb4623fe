"""The ``KubeSchedulerConfiguration`` document, version ``kubescheduler.config.k8s.io/v1``.

A scheduler configuration file is a YAML document with ``apiVersion:
kubescheduler.config.k8s.io/v1`` and ``kind: KubeSchedulerConfiguration``. Its main part is a list
of *profiles*. A profile is a named scheduler: a pod picks it with ``spec.schedulerName``, and the
profile says which *plugins* run at each *extension point* of the scheduling cycle and with which
arguments. The rest of the document configures the process around the profiles: leader election,
the API client, queue backoff, and HTTP *extenders* (external services consulted as extra filter
and score steps).

The classes mirror the Go types of ``k8s.io/kube-scheduler/config/v1`` field for field. JSON names
are camelCase, exactly as in the file. Every class rejects a field it does not know, as
kube-scheduler's strict decoding does. Durations are seconds (``float``) and are written in files
as Go duration strings such as ``"15s"``.

Field defaults below are those a freshly decoded document gets; kube-scheduler's *defaulting*
(:func:`kubesched.config.set_defaults`) then fills in what depends on other fields: the profile
list, the plugin sets, and the plugin arguments.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from kubesched.config._decode import Duration

API_VERSION = "kubescheduler.config.k8s.io/v1"
"""The only ``apiVersion`` kubesched (like kube-scheduler v1.34) accepts."""

KIND = "KubeSchedulerConfiguration"
"""The ``kind`` of a scheduler configuration document."""

DEFAULT_SCHEDULER_NAME = "default-scheduler"
"""The profile name pods get when they do not set ``spec.schedulerName``."""

Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class ConfigStruct(
    msgspec.Struct,
    kw_only=True,
    forbid_unknown_fields=True,
    rename="camel",
    repr_omit_defaults=True,
):
    """Base of the configuration types: camelCase names, unknown fields rejected."""


# --------------------------------------------------------------------------------------------
# Process-level settings
# --------------------------------------------------------------------------------------------


class LeaderElectionConfiguration(ConfigStruct):
    """How replicas of the scheduler agree on which one is active.

    When ``leader_elect`` is true, every replica tries to hold a Lease object
    (``resource_namespace``/``resource_name``) in the API server; only the holder schedules. The
    holder renews the lease; if it has not renewed for ``renew_deadline`` it gives up, and others
    may take the lease once ``lease_duration`` has passed since the last renewal. Candidates retry
    every ``retry_period``. Defaults: on, 15s / 10s / 2s, a ``leases`` lock named
    ``kube-scheduler`` in ``kube-system``.
    """

    leader_elect: bool = True
    lease_duration: Duration = 15.0
    renew_deadline: Duration = 10.0
    retry_period: Duration = 2.0
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


class ClientConnectionConfiguration(ConfigStruct):
    """How the scheduler talks to the API server.

    ``kubeconfig`` is a path to a kubeconfig file (empty: in-cluster configuration).
    ``qps``/``burst`` rate-limit requests (defaults 50 and 100, higher than the generic client's
    because the scheduler writes a binding per pod). ``content_type`` is the request encoding
    (default ``application/vnd.kubernetes.protobuf``); ``accept_content_types`` is the Accept
    header (empty: the client's default).
    """

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: Int32 = 100


# --------------------------------------------------------------------------------------------
# Plugins and profiles
# --------------------------------------------------------------------------------------------


class Plugin(ConfigStruct):
    """One plugin enabled or disabled at an extension point.

    ``weight`` only matters for Score plugins: a node's score from the plugin (0..100) is
    multiplied by it before the scores of all plugins are summed. ``None`` (not written) and ``0``
    both mean weight 1 when the framework builds the profile.
    """

    name: str
    weight: Int32 | None = None


class PluginSet(ConfigStruct):
    """The plugins enabled and disabled at one extension point.

    After defaulting, ``enabled`` is the merged list (defaults first, in order, then the user's
    additions), and ``disabled`` keeps what the user disabled, including ``"*"`` (all defaults),
    because the multi-point expansion needs it. See :func:`kubesched.config.merge_plugin_set`.
    """

    enabled: list[Plugin] = msgspec.field(default_factory=list)
    disabled: list[Plugin] = msgspec.field(default_factory=list)


class Plugins(ConfigStruct):
    """Plugins per extension point of the scheduling framework.

    A pod's trip through a profile, and the point where each set of plugins runs:

    - ``pre_enqueue``: before the pod enters the active queue (for example, scheduling gates).
    - ``queue_sort``: orders the queue; exactly one plugin, the same in every profile.
    - ``pre_filter`` / ``filter``: compute pod-wide state, then reject nodes that cannot run the
      pod.
    - ``post_filter``: runs only when no node fits (preemption lives here).
    - ``pre_score`` / ``score``: rank the nodes that passed filtering; scores are weighted and
      summed.
    - ``reserve`` / ``permit``: claim resources on the chosen node; allow, reject or delay binding.
    - ``pre_bind`` / ``bind`` / ``post_bind``: the binding cycle that writes the decision to the
      API server.
    - ``multi_point``: a shortcut that enables a plugin at every extension point it implements.
      kube-scheduler's own default set is given entirely here.
    """

    pre_enqueue: PluginSet = msgspec.field(default_factory=PluginSet)
    queue_sort: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    filter: PluginSet = msgspec.field(default_factory=PluginSet)
    post_filter: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_score: PluginSet = msgspec.field(default_factory=PluginSet)
    score: PluginSet = msgspec.field(default_factory=PluginSet)
    reserve: PluginSet = msgspec.field(default_factory=PluginSet)
    permit: PluginSet = msgspec.field(default_factory=PluginSet)
    pre_bind: PluginSet = msgspec.field(default_factory=PluginSet)
    bind: PluginSet = msgspec.field(default_factory=PluginSet)
    post_bind: PluginSet = msgspec.field(default_factory=PluginSet)
    multi_point: PluginSet = msgspec.field(default_factory=PluginSet)

    def extension_point(self, name: str) -> PluginSet:
        """The plugin set of extension point ``name`` in its JSON spelling (``"preFilter"``)."""
        try:
            attr = _EXTENSION_POINT_ATTRS[name]
        except KeyError:
            raise KeyError(f"unknown extension point {name!r}") from None
        value: PluginSet = getattr(self, attr)
        return value


EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
"""The specific extension points, in the order of a pod's trip through the framework.

``multiPoint`` is not one of them: it is expanded onto these.
"""

_EXTENSION_POINT_ATTRS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "queue_sort",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
    "multiPoint": "multi_point",
}

PluginArgsValue = dict[str, Any] | msgspec.Struct
"""What ``PluginConfig.args`` holds: raw data, or the plugin's typed args once decoded."""


class PluginConfig(ConfigStruct):
    """Arguments for one plugin of a profile.

    ``args`` is whatever the plugin accepts. As written in the file it is a plain mapping. For the
    in-tree plugins (those in :data:`kubesched.config.PLUGIN_ARGS_TYPES`) loading decodes it into
    the plugin's args type with defaults applied, as kube-scheduler does; for other plugins it
    stays a mapping until the plugin decodes it with :func:`kubesched.config.decode_args`.
    """

    name: str
    args: PluginArgsValue | None = None


class KubeSchedulerProfile(ConfigStruct):
    """A named scheduler: which plugins run, and with which arguments.

    ``scheduler_name`` is matched against ``pod.spec.schedulerName``; it is required and unique
    (defaulting names a lone profile ``default-scheduler``). ``percentage_of_nodes_to_score``
    overrides the global setting for this profile (``None``: use the global one).
    ``plugins`` is merged with kube-scheduler's default plugin set during defaulting;
    ``plugin_config`` then holds an entry, with defaulted args, for every enabled in-tree plugin
    that takes arguments.
    """

    scheduler_name: str | None = None
    percentage_of_nodes_to_score: Int32 | None = None
    plugins: Plugins = msgspec.field(default_factory=Plugins)
    plugin_config: list[PluginConfig] = msgspec.field(default_factory=list)

    def plugin_args(self, name: str) -> PluginArgsValue | None:
        """The args configured for plugin ``name`` in this profile, or ``None``."""
        for pc in self.plugin_config:
            if pc.name == name:
                return pc.args
        return None


# --------------------------------------------------------------------------------------------
# Extenders
# --------------------------------------------------------------------------------------------


class ExtenderTLSConfig(ConfigStruct):
    """TLS settings for talking to an extender over HTTPS.

    ``cert_file``/``key_file`` (or the PEM bytes in ``cert_data``/``key_data``, which win) are a
    client certificate; ``ca_file``/``ca_data`` are the roots that sign the extender's certificate;
    ``server_name`` overrides the name checked in it. ``insecure`` skips verification (tests
    only). In the file the ``*Data`` fields are base64, as Go encodes bytes.
    """

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


class ExtenderManagedResource(ConfigStruct):
    """An extended resource (``example.com/foo``) handled by an extender.

    Pods that request none of an extender's managed resources are not sent to it. With
    ``ignored_by_scheduler`` the scheduler's own resource-fit check skips the resource, leaving it
    to the extender.
    """

    name: str
    ignored_by_scheduler: bool = False


class Extender(ConfigStruct):
    """An HTTP service consulted as an extra step of every profile.

    The scheduler POSTs to ``url_prefix`` + ``/`` + verb. ``filter_verb`` removes nodes,
    ``prioritize_verb`` scores them (0..10, multiplied by ``weight``, which must then be
    positive), ``bind_verb`` makes the extender bind the pod (at most one extender may),
    ``preempt_verb`` lets it veto or adjust preemption victims. An empty verb means the extender
    does not offer that call. ``http_timeout`` bounds each call (0: the scheduler's default of
    5 seconds). ``node_cache_capable`` sends node names instead of whole nodes. ``ignorable``
    extenders do not fail scheduling when unreachable.
    """

    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: Int64 = 0
    bind_verb: str = ""
    enable_https: bool = msgspec.field(default=False, name="enableHTTPS")
    tls_config: ExtenderTLSConfig | None = None
    http_timeout: Duration = 0.0
    node_cache_capable: bool = False
    managed_resources: list[ExtenderManagedResource] = msgspec.field(default_factory=list)
    ignorable: bool = False


# --------------------------------------------------------------------------------------------
# The document
# --------------------------------------------------------------------------------------------


class KubeSchedulerConfiguration(ConfigStruct):
    """A whole scheduler configuration document.

    - ``parallelism``: how many goroutines kube-scheduler uses for filtering and scoring
      (default 16); kubesched's vectorized plugins do not need it, but it is validated alike.
    - ``percentage_of_nodes_to_score``: stop filtering once this share of nodes was found
      feasible. ``0`` (the default) means kube-scheduler's adaptive share, 50% of nodes falling to
      5% as the cluster grows; 100 scores every node.
    - ``pod_initial_backoff_seconds`` / ``pod_max_backoff_seconds``: an unschedulable pod is
      retried after a backoff that starts at the first (default 1) and doubles up to the second
      (default 10).
    - ``enable_profiling`` / ``enable_contention_profiling``: serve ``/debug/pprof``
      (defaults: on, and contention profiling follows profiling).
    - ``delay_cache_until_active``: with leader election, fill informer caches only after
      becoming leader (default off).
    - ``healthz_bind_address`` / ``metrics_bind_address``: deprecated ``host:port`` listen
      addresses. kube-scheduler's v1 API no longer has these fields and rejects a file that sets
      them; kubesched accepts them (empty: not set) for its own health and metrics endpoints, so
      such a file is not portable to kube-scheduler.
    """

    api_version: str = API_VERSION
    kind: str = KIND
    parallelism: Int32 = 16
    leader_election: LeaderElectionConfiguration = msgspec.field(
        default_factory=LeaderElectionConfiguration
    )
    client_connection: ClientConnectionConfiguration = msgspec.field(
        default_factory=ClientConnectionConfiguration
    )
    healthz_bind_address: str = ""
    metrics_bind_address: str = ""
    enable_profiling: bool = True
    enable_contention_profiling: bool | None = None
    percentage_of_nodes_to_score: Int32 = 0
    pod_initial_backoff_seconds: Int64 = 1
    pod_max_backoff_seconds: Int64 = 10
    profiles: list[KubeSchedulerProfile] = msgspec.field(default_factory=list)
    extenders: list[Extender] = msgspec.field(default_factory=list)
    delay_cache_until_active: bool = False

    def profile(self, scheduler_name: str) -> KubeSchedulerProfile:
        """The profile whose ``scheduler_name`` is ``scheduler_name``; ``KeyError`` if none."""
        for p in self.profiles:
            if p.scheduler_name == scheduler_name:
                return p
        raise KeyError(scheduler_name)
