"""Which plugin classes exist under which names: in-tree ones plus entry points.

An installed package registers plugins under the ``kubesched.plugins`` entry-point group::

    [project.entry-points."kubesched.plugins"]
    AnnotationGate = "mycompany_plugins.gate:AnnotationGate"

The entry point's name is the plugin's name in configurations; its value is a :class:`Plugin`
subclass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points

from kubesched.framework._errors import FrameworkError
from kubesched.framework._interface import Plugin, extension_points_of

ENTRY_POINT_GROUP = "kubesched.plugins"

log = logging.getLogger(__name__)


class RegistryError(FrameworkError):
    """A plugin that cannot be registered (name clash, not a Plugin)."""


class Registry(Mapping[str, type[Plugin]]):
    """Plugin name -> plugin class."""

    def __init__(self, plugins: Mapping[str, type[Plugin]] | None = None) -> None:
        self._plugins: dict[str, type[Plugin]] = {}
        for name, cls in (plugins or {}).items():
            self.register(cls, name)

    def register(self, cls: type[Plugin], name: str | None = None) -> None:
        name = name or cls.name
        if not (isinstance(cls, type) and issubclass(cls, Plugin)):
            raise RegistryError(f"plugin {name!r}: {cls!r} is not a kubesched Plugin class")
        if not extension_points_of(cls):
            raise RegistryError(f"plugin {name!r} implements no extension point")
        if name in self._plugins and self._plugins[name] is not cls:
            raise RegistryError(f"a plugin named {name!r} already exists")
        self._plugins[name] = cls

    def load_entry_points(self) -> list[str]:
        """Register every ``kubesched.plugins`` entry point; returns the names added.

        A broken entry point is logged and skipped: one bad package must not stop the scheduler
        from starting with the plugins its configuration actually uses (an enabled plugin that
        failed to load is then reported as unknown, naming the field).
        """
        added = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                cls = ep.load()
                self.register(cls, ep.name)
            except Exception as e:  # any import-time failure of a third-party package
                log.error("cannot load plugin %r from %s: %s", ep.name, ep.value, e)
                continue
            added.append(ep.name)
        return added

    def __getitem__(self, name: str) -> type[Plugin]:
        return self._plugins[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins)

    def __len__(self) -> int:
        return len(self._plugins)
