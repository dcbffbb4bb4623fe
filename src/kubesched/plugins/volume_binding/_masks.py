"""Node selectors of PVs and topology terms of StorageClasses, evaluated over many nodes at once.

Each requirement is evaluated once per distinct value of its label across the node table and
gathered by the nodes' value ids, as the NodeAffinity plugin does for pods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kubesched.api import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySelectorTerm,
    node_selector_requirement_matches,
    node_selector_term_matches,
)
from kubesched.framework import BoolArray, Nodes


def label_mask(nodes: Nodes, key: str, holds: Callable[[str | None], bool]) -> BoolArray:
    """``holds`` of each node's value of label ``key`` (``None`` where it has none)."""
    column = nodes.table.labels.get(key)
    if column is None:
        return np.full(len(nodes), holds(None), dtype=np.bool_)
    lut = np.fromiter(map(holds, column.values), dtype=np.bool_, count=len(column.values))
    out: BoolArray = lut.take(column.ids.take(nodes.slots))
    return out


def _term_mask(term: NodeSelectorTerm, nodes: Nodes) -> BoolArray:
    if not term.match_expressions and not term.match_fields:
        return np.zeros(len(nodes), dtype=np.bool_)
    # A PV's node affinity is checked against the node's labels only: a field requirement sees
    # an empty node name, the same on every node.
    if term.match_fields and not node_selector_term_matches(
        NodeSelectorTerm(match_fields=term.match_fields), {}, ""
    ):
        return np.zeros(len(nodes), dtype=np.bool_)
    out = np.ones(len(nodes), dtype=np.bool_)
    for req in term.match_expressions:
        key = req.key

        def holds(value: str | None, req: NodeSelectorRequirement = req, key: str = key) -> bool:
            labels = {} if value is None else {key: value}
            return node_selector_requirement_matches(req, labels)

        out &= label_mask(nodes, key, holds)
    return out


def node_selector_mask(selector: NodeSelector, nodes: Nodes) -> BoolArray:
    """``CheckNodeAffinity`` of a PV's required node selector on each node (terms ORed)."""
    out = np.zeros(len(nodes), dtype=np.bool_)
    for term in selector.node_selector_terms:
        out |= _term_mask(term, nodes)
    return out


def topology_terms_mask(terms: Sequence[TopologySelectorTerm], nodes: Nodes) -> BoolArray:
    """``MatchTopologySelectorTerms`` on each node: no terms match everywhere."""
    if not terms:
        return np.ones(len(nodes), dtype=np.bool_)
    out = np.zeros(len(nodes), dtype=np.bool_)
    for term in terms:
        m = np.ones(len(nodes), dtype=np.bool_)
        for req in term.match_label_expressions:
            values = frozenset(req.values)

            def holds(value: str | None, values: frozenset[str] = values) -> bool:
                return value is not None and value in values

            m &= label_mask(nodes, req.key, holds)
        out |= m
    return out
