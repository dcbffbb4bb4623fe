"""What ``kubesched why`` prints: a report for people, JSON for programs (docs/why.md)."""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched.plugins.node_resources.fit import NAME as NODE_RESOURCES_FIT
from kubesched.simulate._output import JSON_FORMAT_VERSION
from kubesched.simulate._run import REASON_GATED, REASON_NOT_HANDLED, REASON_SCHEDULED
from kubesched.simulate._why import NearNode, WhyReport, format_amount


def why_json(report: WhyReport) -> dict[str, Any]:
    return {
        "formatVersion": JSON_FORMAT_VERSION,
        "namespace": report.namespace,
        "name": report.name,
        "schedulerName": report.scheduler_name,
        "reason": report.reason,
        "node": report.node,
        "message": report.message,
        "nodes": report.num_nodes,
        "preFilter": report.pre_filter,
        "rejections": [
            {"plugin": r.plugin, "first": r.first, "any": r.any, "reasons": r.reasons}
            for r in report.rejections
        ],
        "closest": [
            {
                "node": n.name,
                "blockedBy": n.blocked_by,
                "short": {
                    r: {"requested": format_amount(r, want), "free": format_amount(r, free)}
                    for r, (want, free) in n.short.items()
                },
            }
            for n in report.closest
        ],
        "waysOut": [
            {"kind": w.kind, "text": w.text, "nodes": w.nodes, "detail": w.detail}
            for w in report.ways_out
        ],
        "seconds": round(report.seconds, 3),
    }


def render_why_json(report: WhyReport) -> str:
    encoded = msgspec.json.encode(why_json(report))
    return msgspec.json.format(encoded, indent=2).decode() + "\n"


def _blocked_cell(near: NearNode) -> str:
    parts = []
    for plugin, reason in near.blocked_by.items():
        part = f"{plugin}: {reason}"
        if plugin == NODE_RESOURCES_FIT and near.short:
            part += (
                " ("
                + ", ".join(
                    f"{r} {format_amount(r, want)} requested, {format_amount(r, free)} free"
                    for r, (want, free) in near.short.items()
                )
                + ")"
            )
        parts.append(part)
    return "; ".join(parts)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)), r[-1]]).rstrip()
        for r in rows
    ]


def render_why_table(report: WhyReport) -> str:
    lines = [f"pod {report.key} (schedulerName {report.scheduler_name}), {report.num_nodes} nodes"]
    if report.reason == REASON_SCHEDULED:
        lines.append(
            f"it fits now: the scheduler would bind it to {report.node}. If it is still Pending, "
            f"no scheduler named {report.scheduler_name!r} has tried it since the cluster changed."
        )
        return "\n".join(lines) + "\n"
    lines.append(f"{report.reason}: {report.message}")
    if report.reason in (REASON_GATED, REASON_NOT_HANDLED):
        return "\n".join(lines) + "\n"
    if report.pre_filter:
        lines.append(f"PreFilter rejected it before any node was asked: {report.pre_filter}")
    if report.rejections:
        rows = [["PLUGIN", "FIRST", "ANY", "REASONS"]]
        for r in report.rejections:
            reasons = ", ".join(f"{k} ({v})" for k, v in sorted(r.reasons.items()))
            rows.append([r.plugin, str(r.first), str(r.any), reasons])
        lines += ["", "Nodes rejected, per Filter plugin (FIRST: the plugin that ruled the node "]
        lines[-1] += "out; ANY: every node it rejects):"
        lines += ["  " + line for line in _table(rows)]
    if report.closest:
        rows = [["NODE", "BLOCKED BY"]]
        rows += [[n.name, _blocked_cell(n)] for n in report.closest]
        lines += ["", "Closest nodes:"]
        lines += ["  " + line for line in _table(rows)]
    lines += ["", "Ways out (each checked on the simulated cluster):"]
    if not report.ways_out:
        lines.append(
            "  none found among tolerations, smaller requests, node affinity, cordons "
            "and preemption"
        )
    lines += [f"  - {w.text}" for w in report.ways_out]
    lines.append(f"\nin {report.seconds:.2f}s")
    return "\n".join(lines) + "\n"
