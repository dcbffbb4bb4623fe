"""The one root of kubesched's exceptions."""

from __future__ import annotations

__all__ = ["KubeschedError"]


class KubeschedError(Exception):
    """What kubesched raises for its caller to handle: ``except kubesched.KubeschedError``
    catches every such error of every package (a bad configuration, an API call that failed,
    a manifest that does not load, a control plane that did not start ...).

    Each package has its own root below this one (``ConfigError``, ``APIError``,
    ``SimulateError``, ``ClusterError`` ...), and errors that are also bad values stay
    ``ValueError`` too. Internal signals that never leave their module are not in the tree.
    """

    def describe(self) -> str:
        """This error as the command line reports it: its text, unless the error knows more
        than its text says (an API error's status code)."""
        return str(self)
