"""kube-scheduler's HTTP extender protocol (``extender/v1``) served by a kubesched profile.

``kubesched extender --config FILE`` (any profile of registered plugins) or ``--agents a,b``
(profiles named by agent) answers kube-scheduler's ``filter``, ``prioritize``, ``preempt`` and
``bind`` calls by running the profile's plugins. See docs/extender.md.

* :class:`Extender`: the verbs over the framework, bytes in, :class:`Reply` out (no HTTP).
* :class:`ExtenderServer`: the aiohttp listener (TLS, mutual TLS, health, metrics).
* :class:`ExtenderService` / :func:`serve`: both, plus node and pod informers.
* :data:`AGENTS`, :func:`agents_config`: agent names and the configuration they stand for.
"""

from kubesched.extender._agents import (
    AGENTS,
    Agent,
    AgentError,
    agents_config,
    parse_agents,
    register_agent,
)
from kubesched.extender._cache import BodyNodes, ClusterCache
from kubesched.extender._command import CommandError, ExtenderCommand
from kubesched.extender._engine import (
    ERR_NOT_SYNCED,
    ERR_UNKNOWN_NODE,
    VERBS,
    Extender,
    Reply,
    scale_scores,
)
from kubesched.extender._errors import ExtenderError
from kubesched.extender._logging import LOG_LEVELS, TRACE, configure_logging
from kubesched.extender._metrics import ExtenderMetrics
from kubesched.extender._profiles import BINDER, QUEUE_SORT, complete_profiles
from kubesched.extender._protocol import (
    MAX_EXTENDER_PRIORITY,
    MIN_EXTENDER_PRIORITY,
    ExtenderArgs,
    ExtenderBindingArgs,
    ExtenderBindingResult,
    ExtenderFilterResult,
    ExtenderPreemptionArgs,
    ExtenderPreemptionResult,
    HostPriority,
    MetaPod,
    MetaVictims,
    Victims,
)
from kubesched.extender._server import ExtenderServer, ServerOptions, server_ssl_context
from kubesched.extender._service import POD_FIELD_SELECTOR, ExtenderService, serve

__all__ = [
    "AGENTS",
    "BINDER",
    "ERR_NOT_SYNCED",
    "ERR_UNKNOWN_NODE",
    "LOG_LEVELS",
    "MAX_EXTENDER_PRIORITY",
    "MIN_EXTENDER_PRIORITY",
    "POD_FIELD_SELECTOR",
    "QUEUE_SORT",
    "TRACE",
    "VERBS",
    "Agent",
    "AgentError",
    "BodyNodes",
    "ClusterCache",
    "CommandError",
    "Extender",
    "ExtenderArgs",
    "ExtenderBindingArgs",
    "ExtenderBindingResult",
    "ExtenderCommand",
    "ExtenderError",
    "ExtenderFilterResult",
    "ExtenderMetrics",
    "ExtenderPreemptionArgs",
    "ExtenderPreemptionResult",
    "ExtenderServer",
    "ExtenderService",
    "HostPriority",
    "MetaPod",
    "MetaVictims",
    "Reply",
    "ServerOptions",
    "Victims",
    "agents_config",
    "complete_profiles",
    "configure_logging",
    "parse_agents",
    "register_agent",
    "scale_scores",
    "serve",
    "server_ssl_context",
]
