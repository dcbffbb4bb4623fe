"""What ``kubesched extender`` does with its options (the CLI only parses them)."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass

from kubesched.config import ConfigError, KubeSchedulerConfiguration, load_config
from kubesched.extender._agents import AgentError, agents_config, parse_agents
from kubesched.extender._errors import ExtenderError
from kubesched.extender._logging import configure_logging
from kubesched.extender._server import ListenError, ServerOptions, server_ssl_context
from kubesched.extender._service import serve
from kubesched.framework import ProfileError, Registry, plugin_args_types
from kubesched.kube import KubeConfigError
from kubesched.plugins import default_registry

__all__ = ["CommandError", "ExtenderCommand"]


class CommandError(ExtenderError):
    """A problem with the options or the configuration, told to the user as is."""


@dataclass(frozen=True, slots=True)
class ExtenderCommand:
    """The options of ``kubesched extender``."""

    config_path: str | None = None
    agents: str | None = None
    host: str = "127.0.0.1"
    port: int = 8888
    tls_cert: str | None = None
    tls_key: str | None = None
    client_ca: str | None = None
    kubeconfig: str | None = None
    standalone: bool = False
    path_prefix: str = ""
    filter_verb: str = "filter"
    prioritize_verb: str = "prioritize"
    preempt_verb: str = "preempt"
    bind_verb: str = "bind"
    log_level: str | None = None

    def configuration(self, registry: Registry) -> KubeSchedulerConfiguration:
        """The configuration to serve, from ``--config`` or ``--agents``."""
        if (self.config_path is None) == (self.agents is None):
            raise CommandError("give exactly one of --config FILE and --agents a,b,...")
        args_types = plugin_args_types(registry)
        try:
            if self.config_path is not None:
                return load_config(
                    self.config_path, plugin_args_types=args_types, plugin_names=registry
                )
            assert self.agents is not None
            return agents_config(
                parse_agents(self.agents), set(registry), plugin_args_types=args_types
            )
        except ConfigError as e:
            raise CommandError(f"invalid configuration: {e}") from e
        except AgentError as e:
            raise CommandError(str(e)) from e

    def ssl_context(self) -> ssl.SSLContext | None:
        if self.tls_cert is None and self.tls_key is None:
            if self.client_ca is not None:
                raise CommandError("--client-ca needs --tls-cert and --tls-key")
            return None
        if self.tls_cert is None or self.tls_key is None:
            raise CommandError("--tls-cert and --tls-key go together")
        try:
            return server_ssl_context(self.tls_cert, self.tls_key, self.client_ca)
        except (OSError, ssl.SSLError) as e:
            raise CommandError(f"cannot use the TLS files: {e}") from e

    def options(self) -> ServerOptions:
        if not 0 <= self.port <= 65535:
            raise CommandError(f"--port {self.port}: not a port number")
        return ServerOptions(
            host=self.host,
            port=self.port,
            path_prefix=self.path_prefix,
            verbs={
                "filter": self.filter_verb,
                "prioritize": self.prioritize_verb,
                "preempt": self.preempt_verb,
                "bind": self.bind_verb,
            },
            ssl_context=self.ssl_context(),
        )

    def run(self) -> int:
        """Check everything, then serve until SIGINT/SIGTERM; the exit code."""
        configure_logging(self.log_level)
        registry = default_registry()
        config = self.configuration(registry)
        options = self.options()
        try:
            return asyncio.run(
                serve(
                    config,
                    registry,
                    options,
                    kubeconfig=self.kubeconfig,
                    standalone=self.standalone,
                )
            )
        except KubeConfigError as e:
            raise CommandError(
                f"{e} (--standalone serves full Nodes bodies without a cluster)"
            ) from e
        except (ConfigError, ProfileError) as e:
            raise CommandError(f"invalid configuration: {e}") from e
        except ListenError as e:
            raise CommandError(str(e.strerror)) from e
