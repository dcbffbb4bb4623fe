"""What ``kubesched simulate`` prints: a table for people, JSON for programs.

The JSON document is described in docs/simulate.md; keep the two in step.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched.simulate._run import (
    FILTER_OK,
    PRE_FILTER_RESULT,
    REASON_GATED,
    REASON_NOT_HANDLED,
    REASON_SCHEDULED,
    NodeExplanation,
    PodResult,
    SimulationResult,
)

#: Bumped on an incompatible change of the JSON document.
JSON_FORMAT_VERSION = 1

_NODE_COLUMN = {
    REASON_GATED: "gated",
    REASON_NOT_HANDLED: "not handled",
    "Unschedulable": "unschedulable",
    "SchedulerError": "error",
    "Skipped": "skipped",
}


def _node_column(p: PodResult) -> str:
    return p.node if p.node is not None else _NODE_COLUMN.get(p.reason, p.reason)


# -- JSON ------------------------------------------------------------------------------------


def _node_json(n: NodeExplanation) -> dict[str, Any]:
    return {"filter": n.filter, "preFilter": n.pre_filter, "scores": n.scores, "total": n.total}


def pod_json(p: PodResult) -> dict[str, Any]:
    """One pod's entry of the JSON document."""
    return {
        "namespace": p.namespace,
        "name": p.name,
        "node": p.node,
        "reason": p.reason,
        "message": p.message,
        "schedulerName": p.scheduler_name,
        "attempt": p.attempt,
        "feasibleNodes": p.feasible_nodes or [],
        "scored": p.scored,
        "nodes": {name: _node_json(n) for name, n in (p.nodes or {}).items()},
        "nominatedNode": p.nominated_node,
        "victims": p.victims,
    }


def summary(result: SimulationResult) -> dict[str, int]:
    counts = result.counts()
    return {
        "nodes": result.num_nodes,
        "runningPods": result.num_running,
        "pods": len(result.pods),
        "scheduled": counts.get(REASON_SCHEDULED, 0),
        "unschedulable": counts.get("Unschedulable", 0),
        "errors": counts.get("SchedulerError", 0),
        "gated": counts.get(REASON_GATED, 0),
        "notHandled": counts.get(REASON_NOT_HANDLED, 0),
    }


def to_json_document(result: SimulationResult) -> dict[str, Any]:
    return {
        "formatVersion": JSON_FORMAT_VERSION,
        "pods": [pod_json(p) for p in result.pods],
        "summary": summary(result),
        "issues": [
            {"severity": i.severity, "location": i.location, "message": i.message}
            for i in result.issues
        ],
    }


def render_json(result: SimulationResult) -> str:
    """The JSON document, indented, keys in a fixed order, ending with a newline."""
    encoded = msgspec.json.encode(to_json_document(result))
    return msgspec.json.format(encoded, indent=2).decode() + "\n"


# -- table -----------------------------------------------------------------------------------


def _rows(rows: list[list[str]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)]
        out.append((indent + "  ".join([*cells, r[-1]])).rstrip())
    return out


def _summary_line(result: SimulationResult) -> str:
    s = summary(result)
    parts = [f"{s['scheduled']} scheduled"]
    for key, label in (
        ("unschedulable", "unschedulable"),
        ("errors", "failed with an error"),
        ("gated", "gated"),
        ("notHandled", "not handled"),
    ):
        if s[key]:
            parts.append(f"{s[key]} {label}")
    return (
        f"{_count(s['pods'], 'pod')} on {_count(s['nodes'], 'node')} "
        f"({_count(s['runningPods'], 'pod')} already running): "
        + ", ".join(parts)
        + f", in {result.seconds:.2f}s"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def render_table(result: SimulationResult, *, explain: bool = False) -> str:
    """Per pod, its node or why it has none; with ``explain``, every node's verdict too."""
    lines: list[str] = []
    if not explain:
        rows = [["POD", "NODE", "MESSAGE"]]
        for p in result.pods:
            message = _preemption_note(p) if p.node is not None else p.message
            rows.append([p.key, _node_column(p), message])
        lines.extend(_rows(rows) if result.pods else ["no pods to schedule"])
    else:
        for p in result.pods:
            lines.extend(_explain_pod(p))
            lines.append("")
        if not result.pods:
            lines.append("no pods to schedule")
    if result.pods:
        if not explain:
            lines.append("")
        lines.append(_summary_line(result))
    return "\n".join(lines) + "\n"


def _filter_cell(n: NodeExplanation) -> str:
    if n.pre_filter:
        return "; ".join(
            f"PreFilter: {v}" if k == PRE_FILTER_RESULT else f"PreFilter {k}: {v}"
            for k, v in n.pre_filter.items()
        )
    for plugin, verdict in n.filter.items():
        if verdict != FILTER_OK:
            return f"{plugin}: {verdict}"
    return FILTER_OK


def _preemption_note(p: PodResult) -> str:
    """What preemption did for the pod, or ``""``."""
    if p.victims:
        return f"preempted {', '.join(p.victims)} on {p.nominated_node}"
    if p.nominated_node:
        return f"nominated to {p.nominated_node} by preemption"
    return ""


def _explain_pod(p: PodResult) -> list[str]:
    note = _preemption_note(p)
    if p.node is not None:
        head = f"{p.key} -> {p.node}" + (f" ({note})" if note else "")
    else:
        head = f"{p.key} -> {_node_column(p)}: {p.message}" + (f" ({note})" if note else "")
    if p.nodes is None or not p.nodes:
        return [head]
    feasible = [(name, n) for name, n in p.nodes.items() if n.feasible]
    rejected = [(name, n) for name, n in p.nodes.items() if not n.feasible]
    if p.node is not None:
        head += f"  ({len(feasible)} of {len(p.nodes)} nodes feasible"
        head += ", only one: scoring skipped, as kube-scheduler does)" if not p.scored else ")"
    # Best first; among equal totals the node the tie-break picked, then by name.
    feasible.sort(key=lambda item: (-(item[1].total or 0), item[0] != p.node, item[0]))
    plugins: list[str] = []
    for _, n in feasible:
        for k in n.scores:
            if k not in plugins:
                plugins.append(k)
    rows = [["NODE", "TOTAL", *plugins, "FILTER"] if p.scored else ["NODE", "FILTER"]]
    for name, n in feasible:
        if p.scored:
            scores = [str(n.scores[k]) if k in n.scores else "-" for k in plugins]
            rows.append([name, str(n.total), *scores, FILTER_OK])
        else:
            rows.append([name, FILTER_OK])
    blank = [""] * (len(rows[0]) - 2)
    for name, n in rejected:
        rows.append([name, *blank, _filter_cell(n)])
    return [head, *_rows(rows, indent="  ")]
