"""``kubesched ui``: the simulator's view of a cluster as a web page on 127.0.0.1.

The nodes as a grid by zone, coloured by allocated CPU or memory; per pod the explain table
(every node's first failing plugin, or each plugin's weighted score) and the ``why`` report;
what-if runs on an in-memory copy; a running scheduler's queue through its read-only debug
endpoint. The page, its script and its style ship in the package. See docs/ui.md.
"""

from kubesched.ui._model import Loaded, WhatIfError, load
from kubesched.ui._serve import DEFAULT_PORT, serve
from kubesched.ui._server import build_app

__all__ = ["DEFAULT_PORT", "Loaded", "WhatIfError", "build_app", "load", "serve"]
