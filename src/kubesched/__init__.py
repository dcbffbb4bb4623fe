"""kubesched: a Kubernetes scheduler toolkit.

kube-scheduler's scheduling framework and default plugins, ported to Python with their semantics,
plus plugins kube-scheduler does not ship. The same framework runs behind three front ends: the
standalone scheduler (``kubesched run``), the scheduler extender (``kubesched extender``) and the
simulator (``kubesched simulate``).
"""

import os

# numpy's OpenBLAS starts a thread per core at import, and its threads spin after each call.
# kubesched's arrays are a few thousand values, one cycle at a time: the threads only took CPU
# from the API server beside it (docs/dependencies.md). A value set by the user stands.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from kubesched._errors import KubeschedError

__all__ = ["KubeschedError", "__version__"]
__version__ = "0.1.0"
