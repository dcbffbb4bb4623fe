"""The simulator: kube-scheduler's decisions on an in-memory cluster, and why.

Input comes from manifests (:func:`load_inputs`, :class:`InputBuilder`) or a live cluster read
once (:func:`read_cluster`); :func:`simulate` runs ``kubesched run``'s scheduler over it with an
in-memory binder, one attempt per pending pod; :func:`render_table` and :func:`render_json` print
the result. ``kubesched simulate`` is :func:`run`; ``kubesched why`` (:func:`why`, one pending
pod: what rejects it and what would let it in) is :func:`run_why`. See docs/simulate.md.
"""

from kubesched.api import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from kubesched.simulate._command import ProgressLine, example_paths, load, run
from kubesched.simulate._errors import InputError, SimulateError
from kubesched.simulate._input import (
    InputBuilder,
    Inputs,
    Issue,
    load_inputs,
    load_text,
)
from kubesched.simulate._live import read_cluster
from kubesched.simulate._objects import (
    ClusterObjects,
    Namespace,
    PriorityClass,
)
from kubesched.simulate._output import (
    JSON_FORMAT_VERSION,
    pod_json,
    render_json,
    render_table,
    to_json_document,
)
from kubesched.simulate._profiles import profiles_for
from kubesched.simulate._run import (
    FILTER_OK,
    PRE_FILTER_RESULT,
    REASON_GATED,
    REASON_NOT_HANDLED,
    REASON_SCHEDULED,
    Detail,
    NodeExplanation,
    PodResult,
    Simulation,
    SimulationResult,
    simulate,
)
from kubesched.simulate._why import NearNode, Rejection, WayOut, WhyError, WhyReport, only_pod, why
from kubesched.simulate._why_command import run_why
from kubesched.simulate._why_output import render_why_json, render_why_table, why_json

__all__ = [
    "FILTER_OK",
    "JSON_FORMAT_VERSION",
    "PRE_FILTER_RESULT",
    "REASON_GATED",
    "REASON_NOT_HANDLED",
    "REASON_SCHEDULED",
    "CSINode",
    "ClusterObjects",
    "Detail",
    "InputBuilder",
    "InputError",
    "Inputs",
    "Issue",
    "Namespace",
    "NearNode",
    "NodeExplanation",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "PodResult",
    "PriorityClass",
    "ProgressLine",
    "Rejection",
    "SimulateError",
    "Simulation",
    "SimulationResult",
    "StorageClass",
    "WayOut",
    "WhyError",
    "WhyReport",
    "example_paths",
    "load",
    "load_inputs",
    "load_text",
    "only_pod",
    "pod_json",
    "profiles_for",
    "read_cluster",
    "render_json",
    "render_table",
    "render_why_json",
    "render_why_table",
    "run",
    "run_why",
    "simulate",
    "to_json_document",
    "why",
    "why_json",
]
