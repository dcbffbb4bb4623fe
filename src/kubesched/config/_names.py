"""Kubernetes' name checks (``k8s.io/apimachinery/pkg/util/validation``), with its messages.

Each function returns a list of messages, empty when the value is acceptable, exactly like the Go
helpers, so a caller can turn each message into a ``FieldError.invalid`` for the field at hand.

- A *qualified name* is what label keys and resource names are made of: an optional DNS-subdomain
  prefix and ``/``, then a name of at most 63 characters of ``[A-Za-z0-9-_.]`` that starts and
  ends with an alphanumeric character (``example.com/gpu``, ``cpu``).
- A *label value* is empty or a name without a prefix.
- An *extended resource name* is a qualified name with a domain prefix outside
  ``kubernetes.io/`` (``example.com/foo``), which is what scheduler extenders may manage.
"""

from __future__ import annotations

import ipaddress
import re

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_QUALIFIED_NAME_ERR = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_ERR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MAX = 253

_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_LABEL_VALUE_ERR = (
    "a valid label must be an empty string or consist of alphanumeric characters, "
    "'-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MAX = 63


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Kubernetes' ``RegexError``: the message, examples, and the regular expression used."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    parts = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {parts}regex used for validation is '{fmt}')"


def _max_len_error(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_subdomain(value: str) -> list[str]:
    """Problems with ``value`` as a lowercase RFC 1123 subdomain (``example.com``)."""
    errs: list[str] = []
    if len(value) > _DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len_error(_DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.match(value):
        errs.append(_regex_error(_DNS1123_SUBDOMAIN_ERR, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Problems with ``value`` as a qualified name (``cpu``, ``example.com/gpu``)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > _QUALIFIED_NAME_MAX:
        errs.append("name part " + _max_len_error(_QUALIFIED_NAME_MAX))
    if not _QUALIFIED_NAME_RE.match(name):
        errs.append(
            "name part "
            + _regex_error(_QUALIFIED_NAME_ERR, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_valid_label_value(value: str) -> list[str]:
    """Problems with ``value`` as a label value (empty, or a name without a prefix)."""
    errs: list[str] = []
    if len(value) > _LABEL_VALUE_MAX:
        errs.append(_max_len_error(_LABEL_VALUE_MAX))
    if not _LABEL_VALUE_RE.match(value):
        errs.append(
            _regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
        )
    return errs


def is_native_resource(name: str) -> bool:
    """Whether ``name`` is a resource Kubernetes defines (no prefix, or ``kubernetes.io/``)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """Whether ``name`` may be an extended resource (a domain-prefixed, non-native name)."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def _split_host_port(value: str) -> tuple[str, str] | None:
    """Go's ``net.SplitHostPort``: ``host:port`` or ``[v6-host]:port``; ``None`` if malformed."""
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1 : end + 2] != ":":
            return None
        return value[1:end], value[end + 2 :]
    host, sep, port = value.rpartition(":")
    if not sep or ":" in host:
        return None
    return host, port


def is_valid_socket_addr(value: str) -> list[str]:
    """Problems with ``value`` as ``host:port`` where host is an IP address (``0.0.0.0:10259``)."""
    split = _split_host_port(value)
    if split is None:
        return ["must be a valid socket address format, (e.g. 0.0.0.0:10254 or [::]:10254)"]
    host, port = split
    errs: list[str] = []
    port_num = int(port) if port.isascii() and port.isdigit() else 0
    if not 1 <= port_num <= 65535:
        errs.append("must be between 1 and 65535, inclusive")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        errs.append("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
    return errs
