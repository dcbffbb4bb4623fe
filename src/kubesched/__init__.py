"""kubesched: a Kubernetes scheduler toolkit.

kube-scheduler's scheduling framework and default plugins, ported to Python with their semantics,
plus plugins kube-scheduler does not ship. The same framework runs behind three front ends: the
standalone scheduler (``kubesched run``), the scheduler extender (``kubesched extender``) and the
simulator (``kubesched simulate``).
"""

__version__ = "0.1.0"
