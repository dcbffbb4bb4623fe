"""Node selectors of PVs and topology terms of StorageClasses, evaluated over many nodes at once.

A requirement is a set operation on the nodes' interned value ids of its label (``Gt`` and
``Lt`` are evaluated once per distinct value and gathered), so a PV pinned to one hostname costs
one ``isin`` over the node table, however many nodes there are.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from kubesched.api import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    TopologySelectorTerm,
    node_selector_requirement_is_valid,
    node_selector_requirement_matches,
    node_selector_term_matches,
)
from kubesched.framework import BoolArray, Nodes

#: Up to this many values, ``In`` compares ids one by one; beyond, through a lookup table.
_FEW = 8


def label_mask(nodes: Nodes, key: str, holds: Callable[[str | None], bool]) -> BoolArray:
    """``holds`` of each node's value of label ``key`` (``None`` where it has none)."""
    column = nodes.table.labels.get(key)
    if column is None:
        return np.full(len(nodes), holds(None), dtype=np.bool_)
    lut = np.fromiter(map(holds, column.values), dtype=np.bool_, count=len(column.values))
    out: BoolArray = lut.take(nodes.gather(column.ids))
    return out


def requirement_mask(req: NodeSelectorRequirement, nodes: Nodes) -> BoolArray:
    """One ``matchExpressions`` requirement on each node: set operations on the label's value
    ids for ``In``, ``NotIn``, ``Exists`` and ``DoesNotExist``; ``Gt`` and ``Lt`` once per
    distinct value. An invalid requirement matches no node."""
    n = len(nodes)
    if not node_selector_requirement_is_valid(req):
        return np.zeros(n, dtype=np.bool_)
    op = req.operator
    if op in ("Gt", "Lt"):

        def holds(value: str | None) -> bool:
            return node_selector_requirement_matches(req, {} if value is None else {req.key: value})

        return label_mask(nodes, req.key, holds)
    column = nodes.table.labels.get(req.key)
    ids = np.zeros(n, dtype=np.int32) if column is None else column.ids.take(nodes.slots)
    if op in ("Exists", "DoesNotExist"):
        present: BoolArray = ids != 0
        return present if op == "Exists" else ~present
    wanted = [] if column is None else [column.id_of(v) for v in req.values]
    known = [i for i in wanted if i is not None]
    hit = np.zeros(n, dtype=np.bool_)
    if len(known) <= _FEW and column is not None:
        for i in known:
            hit |= ids == i
    elif column is not None:
        lut = np.zeros(len(column.values), dtype=np.bool_)
        lut[known] = True
        hit = lut.take(ids)
    return hit if op == "In" else ~hit


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
        out &= requirement_mask(req, nodes)
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
