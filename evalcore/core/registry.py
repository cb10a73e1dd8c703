"""The metric registry (README, Metrics): one record per metric, read by everything that names one.

A metric is one pure function of a query's sorted relevant ranks in ``core.metrics``
(its definition is the first line of its docstring) and ONE ``Metric`` record in
``METRICS`` below: the name ``metrics=`` and ``--metrics`` take, its per-query
column and summary column, the option that supplies its cut-off k, its labels,
direction and dtype, and whether it is in the default set, the CMC and the
terminal table. The per-query table (``engine.tasks``), the summary and CMC
(``engine.reduce``), the option checks (``engine.options``, ``engine.plan``),
the report pages and terminal tables (``render.pages``) and the gates' direction
(``jobs.gates``) read it; nothing else lists metric names, prefixes or patterns.

Adding a metric (README, Adding a metric): its function in ``core.metrics``, one
``Metric`` in ``METRICS``, and a test file in ``tests/core/metrics/`` with a
brute-force reference in ``tests/core/metrics/references.py``
(``tests/core/metrics/test_common.py`` fails for a metric without one).

A metric's parameters (README, Choosing metrics: Parameters) are declared on its record too (``Metric.params``,
each a ``Param``; ``Metric.setting`` its function at a setting). ``parse`` takes ``name(key=value, ...)[@k]``
for any metric that declares those keys; a setting is the plain metric where every value is its default, a
registered record where one has those values (``ndcg_exp``, ``rbp_0.80``), else a record made the first time a
process meets it (``_bind``), named by one rule (``_with_setting``) so that its name or column alone rebuilds it.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np

from evalcore.core import metrics as m
from evalcore.core import spellings
from evalcore.core.lists import RankLists, binary_lists
from evalcore.errors import InputError, OptionError, UnknownNameError, input_error, mention
from evalcore.types import LIST_ITEMS, LIST_SCORES

Direction = Literal["higher", "lower"]
#: the option that supplies the cut-off k of a metric whose name does not give one
Parameter = Literal["ks", "map_at"]
#: where a summary column goes on the report page: the Ranking table, or "Recall and precision at k"
Section = Literal["ranking", "cutoff"]
PARAMETERS: tuple[Parameter, ...] = ("ks", "map_at")
#: how a summary column combines the per-query values (``metrics.aggregate``)
Aggregate = Literal["mean", "geometric", "sum"]
#: the cut-off's place in a name, column or label pattern
K = "{k}"
#: a parameter's value: a word (``exp``) or a number (``0.8``)
Value = str | float


@dataclass(frozen=True)
class Param:
    """One parameter a metric declares where it is registered (``ndcg(gain=exp, base=10)@10``, ``RBP(p=0.8)``, as
    ir_measures' ``SUPPORTED_PARAMS``): its name, default, the values it takes (words, or a number in an open range)
    and a one-line description; then how a bound value is written in the metric's name and columns (``_exp``,
    ``_base10``, ``_0.80``) and in its label (``exp gain``)."""

    name: str
    default: Value
    #: one line: what it changes
    description: str
    #: the words it takes; empty: a number x with low < x < high (a bound left None is open)
    choices: tuple[str, ...] = ()
    low: float | None = None
    high: float | None = None
    #: other spellings of a word: ``(("exponential", "exp"),)``
    aliases: tuple[tuple[str, str], ...] = ()
    #: a bound value in a name: ``"_" + infix + text``, the text a word's own (or ``texts``'s for it), a number's
    #: ``number_text`` (with ``decimals`` where they say it exactly)
    infix: str = ""
    texts: tuple[tuple[str, str], ...] = ()
    decimals: int | None = None
    #: a bound value in a label: ``label.format(value)`` (a number as ``{:g}`` writes it)
    label: str = "{}"
    #: what a message about a bad value calls it (``the persistence``)
    what: str = ""

    @property
    def allowed(self) -> str:
        """What it takes, in words: ``linear | exp``, ``a number > 1``, ``a number between 0 and 1``."""
        if self.choices:
            return " | ".join(self.choices)
        if self.low is not None and self.high is not None:
            return f"a number between {self.low:g} and {self.high:g}"
        return f"a number > {self.low:g}" if self.low is not None else f"a number < {self.high:g}"

    def __str__(self) -> str:
        """``gain = linear | exp (default linear)``: the listing's and the messages' words."""
        default = self.default if isinstance(self.default, str) else f"{self.default:g}"
        return f"{self.name} = {self.allowed} (default {default})"

    def value(self, text: str) -> Value:
        """The value a spelling gives (``exponential`` -> ``exp``, ``10`` -> 10.0); ValueError saying what it takes."""
        if self.choices:
            word = dict(self.aliases).get(text, text)
            if word not in self.choices:
                raise ValueError(f"{self.what or self.name} must be {' or '.join(self.choices)}, not {text!r}")
            return word
        try:
            x = float(text)
        except ValueError:
            x = math.nan
        if not (math.isfinite(x) and (self.low is None or x > self.low) and (self.high is None or x < self.high)):
            raise ValueError(f"{self.what + ' ' if self.what else ''}{self.name} must be {self.allowed}")
        return x

    def text(self, value: Value) -> str:
        """How a bound value is written in a name: ``_exp``, ``_avg``, ``_base10``, ``_0.80``."""
        if self.choices:
            return f"_{self.infix}{dict(self.texts).get(str(value), str(value))}"
        return f"_{self.infix}{m.number_text(float(value), self.decimals)}"

    def read(self, text: str) -> Value:
        """The value a name's text (``text`` less ``_`` and the infix) is; ValueError where it is none."""
        if self.choices:
            words = {dict(self.texts).get(c, c): c for c in self.choices}
            if text not in words:
                raise ValueError(text)
            return words[text]
        return self.value(text)

    @property
    def pattern(self) -> str:
        """The regular expression of its text in a name, optional, the text without ``_`` and infix its group."""
        if self.choices:
            texts = [re.escape(dict(self.texts).get(c, c)) for c in self.choices if c != self.default]
            return f"(?:_{re.escape(self.infix)}({'|'.join(texts)}))?"
        return f"(?:_{re.escape(self.infix)}([0-9][0-9.e+-]*))?"

    def words(self, value: Value) -> str:
        """A bound value in a label: ``exp gain``, ``base 10``, ``p 0.73``."""
        return self.label.format(value if isinstance(value, str) else f"{value:g}")


#: the declared parameters (README, Choosing metrics: parameters)
GAIN = Param("gain", "linear", "an item's gain: its grade g (linear) or 2^g - 1 (exp, Burges et al.)",
             choices=("linear", "exp"), aliases=(("exponential", "exp"),), label="{} gain")
BASE = Param("base", 2.0, "the logarithm's base b of the discount 1/log_b(r + 1) (nDCG: cancels)", low=1.0,
             infix="base", label="base {}")
TIES = Param("ties", "run", "tied items ordered as --ties says (run), or sharing their gains whatever --ties "
             "(average)", choices=("run", "average"), texts=(("average", "avg"),), label="ties averaged")
PERSISTENCE = Param("p", m.RBP_PERSISTENCE, "the persistence: the chance of going on from one place to the next",
                    low=0.0, high=1.0, decimals=2, label="p {}", what="the persistence")
DCG_PARAMS = (GAIN, BASE)
NDCG_PARAMS = (GAIN, TIES, BASE)
RBP_PARAMS = (PERSISTENCE,)


@dataclass(frozen=True)
class Metric:
    """One registered metric; patterns hold ``{k}`` where the metric has a cut-off."""

    #: what ``metrics=`` takes: ``map``; ``recall@k`` (given as ``recall@5``, or ``recall`` for every --ks)
    name: str
    #: the per-query column: ``ap``, ``recall_at_{k}``
    column: str
    #: the summary column (the mean over the counted queries), or None: per-query only
    summary: str | None
    #: f(indptr, ranks, n_relevant[, k]) -> one value per query; NaN (float64) or -1 (int64) where undefined;
    #: f(lists[, k]) for a metric that reads ``lists`` (gains, judged non-relevant items: ``core.lists``)
    function: Callable[..., np.ndarray]
    #: display labels of the per-query and the summary column (report page, terminal, trend page)
    label: str
    summary_label: str | None = None
    #: which way is better (the default direction of a nightly gate)
    direction: Direction = "higher"
    #: the option that supplies k (None: no cut-off)
    parameter: Parameter | None = None
    #: per-query dtype: int64 for ranks (which stay null under --empty-queries zero), float64 else
    dtype: Literal["int64", "float64"] = "float64"
    #: cmc.parquet (the cumulative distribution of r_1, the mean hit@k at k = 1..max_rank) is written
    #: when the run has a metric that enters it
    cmc: bool = False
    #: computed when ``metrics`` is not given
    default: bool = True
    section: Section = "ranking"
    #: in the terminal's summary table (``evalcore evaluate``, ``show``, ``demo``)
    terminal: bool = True
    #: the function reads a ``RankLists`` (gains, bpref's counts), not the binary ranks alone
    lists: bool = False
    #: needs to know which judged non-relevant items are ranked above each relevant one (bpref)
    judged: bool = False
    #: how the summary combines the counted queries' values: their mean; their geometric mean with each value
    #: floored at 0.00001 (trec_eval's gm_map, gm_bpref); their sum (trec_eval's counts, num_rel)
    aggregate: Aggregate = "mean"
    #: the ``RankLists`` fields it reads that only a ranking's list gives, not a whole-gallery scan:
    #: ``n_retrieved`` (the retrieved count), ``judged`` (which retrieved items are judged; ``RankLists.has``)
    needs: tuple[str, ...] = ()
    #: the metric under --ties average, f(lists[, k]) from the lists' tie groups (``core.metrics``: tied items share
    #: their gains, its docstring the definition); None: not defined there, the metric not being a sum over places
    #: of a gain times a weight the order leaves alone (AP, RR, hit@k, ...), so asking for it is an input error
    average: Callable[..., np.ndarray] | None = None
    #: the parameters it takes (``Param``): ``ndcg(gain=exp, base=10)@k``. A setting of them is a metric of its own
    #: (``_bind``), named by the plain name and each value not its default in this order (``ndcg_exp_base10@k``);
    #: the defaults give the plain metric
    params: tuple[Param, ...] = ()
    #: the values this record binds that are not their defaults, in ``params``' order (``ndcg_exp``:
    #: ``(("gain", "exp"),)``); () for the plain metric
    bound: tuple[tuple[str, Value], ...] = ()
    #: the plain metric this is a setting of (``ndcg`` for ``ndcg_exp``); None for the plain one
    family: str | None = None
    #: on the plain metric: its function at a setting, ``setting(column, **values)``, a callable equal by its values
    #: whose docstring is its definition, with ``.tied()`` its form under --ties average and ``.needs``
    setting: Callable[..., Callable[..., np.ndarray]] | None = field(default=None, compare=False, repr=False)

    @property
    def unbound(self) -> tuple[Param, ...]:
        """The parameters it still takes: its declared ones less those it binds (``ndcg_exp``: ties, base)."""
        bound = dict(self.bound)
        return tuple(p for p in self.params if p.name not in bound)

    @property
    def definition(self) -> str:
        """The formula: the first line of the function's docstring."""
        return (self.function.__doc__ or "").strip().splitlines()[0]

    @property
    def average_definition(self) -> str | None:
        """The formula under --ties average (the first line of ``average``'s docstring), or None: not defined."""
        if self.average is None:
            return None
        return (self.average.__doc__ or "").strip().splitlines()[0]

    @property
    def base(self) -> str:
        """The name without its cut-off: ``recall`` for ``recall@k``."""
        return self.name.removesuffix("@k")

    def null(self, values: np.ndarray) -> np.ndarray:
        """Where the values are undefined (null in the report)."""
        return values < 0 if self.dtype == "int64" else np.isnan(values)


# --------------------------------------------------------------------------- the registrations
# Order matters: it is the order of the per-query columns (metrics without a cut-off,
# then those of --ks, k by k, then those of --map-at) and of the summary sections.

METRICS: tuple[Metric, ...] = (
    Metric("first_rank", "first_rank", None, m.first_rank, "first correct rank", direction="lower", dtype="int64",
           cmc=True),
    Metric("last_rank", "last_rank", None, m.last_rank, "last correct rank", direction="lower", dtype="int64"),
    Metric("map", "ap", "map", m.average_precision, "AP", "mAP"),
    Metric("map_trapz", "ap_trapz", "map_trapz", m.average_precision_trapezoid, "AP (trapz)", "mAP (trapz)",
           terminal=False),
    Metric("minp", "inp", "minp", m.inverse_negative_penalty, "INP", "mINP"),
    Metric("mrr", "rr", "mrr", m.reciprocal_rank, "RR", "MRR"),
    Metric("rprec", "rprec", "rprec", m.r_precision, "R-precision", "R-precision", default=False,
           average=m.r_precision_tied),
    Metric("ndcg", "ndcg", "ndcg", m.ndcg, "nDCG", "nDCG", default=False, lists=True, average=m.ndcg_tied,
           params=NDCG_PARAMS, setting=partial(m.discounted, normalised=True, cut=False)),
    Metric("bpref", "bpref", "bpref", m.bpref, "bpref", "bpref", default=False, lists=True, judged=True),
    Metric("map@k", "ap_at_{k}", "map_at_{k}", m.average_precision_at, "AP@{k}", "mAP@{k}", parameter="map_at"),
    Metric("hit@k", "hit_at_{k}", "hit_at_{k}", m.hit_at, "hit@{k}", "hit@{k}", parameter="ks", cmc=True),
    Metric("recall@k", "recall_at_{k}", "recall_at_{k}", m.recall_at, "recall@{k}", "recall@{k}", parameter="ks",
           section="cutoff", terminal=False, average=m.recall_at_tied),
    Metric("precision@k", "precision_at_{k}", "precision_at_{k}", m.precision_at, "precision@{k}", "precision@{k}",
           parameter="ks", section="cutoff", terminal=False, average=m.precision_at_tied),
    Metric("ndcg@k", "ndcg_at_{k}", "ndcg_at_{k}", m.ndcg_at, "nDCG@{k}", "nDCG@{k}", parameter="ks", default=False,
           lists=True, average=m.ndcg_at_tied, params=NDCG_PARAMS,
           setting=partial(m.discounted, normalised=True, cut=True)),
    Metric("map_cut@k", "ap_cut_{k}", "map_cut_{k}", m.average_precision_cut, "AP cut {k}", "MAP cut {k}",
           parameter="ks", default=False),
    Metric("mrr@k", "rr_at_{k}", "mrr_at_{k}", m.reciprocal_rank_at, "RR@{k}", "MRR@{k}", parameter="ks",
           default=False),
    # trec_eval's -m all_trec measures, under its names lower-cased (case does not matter to parse)
    Metric("num_rel", "num_rel", "num_rel", m.num_rel, "relevant", "relevant (sum)", default=False,
           terminal=False, aggregate="sum", average=m.num_rel_tied),
    Metric("num_rel_ret", "num_rel_ret", "num_rel_ret", m.num_rel_ret, "relevant retrieved",
           "relevant retrieved (sum)", default=False, terminal=False, aggregate="sum", average=m.num_rel_ret_tied),
    Metric("gm_map", "gm_ap", "gm_map", m.floored_average_precision, "AP (floored)", "GM-AP", default=False,
           terminal=False, aggregate="geometric"),
    Metric("gm_bpref", "gm_bpref", "gm_bpref", m.floored_bpref, "bpref (floored)", "GM-bpref", default=False,
           terminal=False, lists=True, judged=True, aggregate="geometric"),
    *(Metric(f"iprec_at_recall_{x:.2f}", f"iprec_at_recall_{x:.2f}", f"iprec_at_recall_{x:.2f}", f,
             f"iprec@recall {x:.2f}", f"iprec@recall {x:.2f}", default=False, terminal=False)
      for x, f in m.IPREC_AT_RECALL.items()),
    Metric("11pt_avg", "11pt_avg", "11pt_avg", m.eleven_point_average, "11-point iprec", "11-point iprec",
           default=False, terminal=False),
    *(Metric(f"rprec_mult_{x:.2f}", f"rprec_mult_{x:.2f}", f"rprec_mult_{x:.2f}", f, f"P@{x:.2f}R",
             f"P@{x:.2f}R", default=False, terminal=False, average=m.RPREC_MULT_TIED[x])
      for x, f in m.RPREC_MULT.items()),
    Metric("num_ret", "num_ret", "num_ret", m.num_ret, "retrieved", "retrieved (sum)", default=False,
           terminal=False, lists=True, needs=("n_retrieved",), aggregate="sum", average=m.num_ret),
    Metric("set_p", "set_p", "set_p", m.set_precision, "set P", "set P", default=False, terminal=False, lists=True,
           needs=("n_retrieved",), average=m.set_precision_tied),
    Metric("set_recall", "set_recall", "set_recall", m.set_recall, "set recall", "set recall", default=False,
           terminal=False, lists=True, needs=("n_retrieved",), average=m.set_recall_tied),
    Metric("set_f", "set_f", "set_f", m.set_f, "set F1", "set F1", default=False, terminal=False, lists=True,
           needs=("n_retrieved",), average=m.set_f_tied),
    Metric("set_map", "set_map", "set_map", m.set_map, "set AP", "set MAP", default=False, terminal=False,
           lists=True, needs=("n_retrieved",)),
    Metric("set_relative_p", "set_relative_p", "set_relative_p", m.set_relative_precision, "set relative P",
           "set relative P", default=False, terminal=False, lists=True, needs=("n_retrieved",),
           average=m.set_relative_precision_tied),
    Metric("utility", "utility", "utility", m.utility, "utility", "utility", default=False, terminal=False,
           lists=True, needs=("n_retrieved",), average=m.utility_tied),
    Metric("num_nonrel_judged_ret", "num_nonrel_judged_ret", "num_nonrel_judged_ret", m.num_nonrel_judged_ret,
           "judged non-relevant retrieved", "judged non-relevant retrieved (sum)", default=False, terminal=False,
           lists=True, needs=("n_retrieved", "judged"), aggregate="sum"),
    # settings of ndcg's parameters registered as metrics of their own (ndcg(gain=exp) is ndcg_exp; any other
    # setting is made when a run names it: _bind)
    Metric("ndcg_exp", "ndcg_exp", "ndcg_exp", m.ndcg_exponential, "nDCG (exp gain)", "nDCG (exp gain)", default=False,
           terminal=False, lists=True, average=m.ndcg_exponential_tied, params=NDCG_PARAMS,
           bound=(("gain", "exp"),), family="ndcg"),
    Metric("ndcg_exp@k", "ndcg_exp_at_{k}", "ndcg_exp_at_{k}", m.ndcg_exponential_at, "nDCG@{k} (exp gain)",
           "nDCG@{k} (exp gain)", parameter="ks", default=False, terminal=False, lists=True,
           average=m.ndcg_exponential_at_tied, params=NDCG_PARAMS, bound=(("gain", "exp"),), family="ndcg@k"),
    Metric("ndcg_avg", "ndcg_avg", "ndcg_avg", m.ndcg_tie_average, "nDCG (ties averaged)", "nDCG (ties averaged)",
           default=False, terminal=False, lists=True, needs=("tie_groups",), average=m.ndcg_tie_average,
           params=NDCG_PARAMS, bound=(("ties", "average"),), family="ndcg"),
    Metric("ndcg_avg@k", "ndcg_avg_at_{k}", "ndcg_avg_at_{k}", m.ndcg_tie_average_at, "nDCG@{k} (ties averaged)",
           "nDCG@{k} (ties averaged)", parameter="ks", default=False, terminal=False, lists=True,
           needs=("tie_groups",), average=m.ndcg_tie_average_at, params=NDCG_PARAMS, bound=(("ties", "average"),),
           family="ndcg@k"),
    Metric("judged@k", "judged_at_{k}", "judged_at_{k}", m.judged_at, "judged@{k}", "judged@{k}", parameter="ks",
           section="cutoff", default=False, terminal=False, lists=True, needs=("n_retrieved", "judged")),
    Metric("unj@k", "unj_at_{k}", "unj_at_{k}", m.unjudged_at, "unjudged@{k}", "unjudged@{k}", direction="lower",
           parameter="ks", section="cutoff", default=False, terminal=False, lists=True, needs=("n_retrieved", "judged")),
    Metric("err@k", "err_at_{k}", "err_at_{k}", m.expected_reciprocal_rank_at, "ERR@{k}", "ERR@{k}", parameter="ks",
           default=False, terminal=False, lists=True),
    # rbp and rbp_resid at trec_eval's p = 0.9, then at the other registered persistences (any other p is made
    # when a run names it: _bind)
    Metric("rbp", "rbp", "rbp", m.rank_biased_precision, "RBP (p 0.9)", "RBP (p 0.9)", default=False, terminal=False,
           lists=True, average=m.rank_biased_precision_tied, params=RBP_PARAMS,
           setting=partial(m.rank_biased, measure="rbp")),
    Metric("rbp_resid", "rbp_resid", "rbp_resid", m.rank_biased_precision_residual, "RBP residual",
           "RBP residual", direction="lower", default=False, terminal=False, lists=True,
           needs=("n_retrieved", "judged"), params=RBP_PARAMS, setting=partial(m.rank_biased, measure="rbp_resid")),
    *(Metric(f"rbp_{p:.2f}", f"rbp_{p:.2f}", f"rbp_{p:.2f}", f, f"RBP (p {p:g})", f"RBP (p {p:g})", default=False,
             terminal=False, lists=True, average=f.tied(), params=RBP_PARAMS, bound=(("p", p),), family="rbp")
      for p, (f, _) in m.RBP_AT.items()),
    *(Metric(f"rbp_resid_{p:.2f}", f"rbp_resid_{p:.2f}", f"rbp_resid_{p:.2f}", f, f"RBP residual (p {p:g})",
             f"RBP residual (p {p:g})", direction="lower", default=False, terminal=False, lists=True,
             needs=("n_retrieved", "judged"), params=RBP_PARAMS, bound=(("p", p),), family="rbp_resid")
      for p, (_, f) in m.RBP_AT.items()),
    Metric("infap", "infap", "infap", m.inferred_average_precision, "infAP", "infAP", default=False, terminal=False,
           lists=True, judged=True),
    Metric("bing", "bing", "bing", m.binary_gain, "binG", "binG", default=False, terminal=False),
    Metric("g", "g", "g", m.normalized_gain, "G", "G", default=False, terminal=False, lists=True),
    Metric("ndcg_rel", "ndcg_rel", "ndcg_rel", m.ndcg_at_relevant, "nDCG (mean at relevant)",
           "nDCG (mean at relevant)", default=False, terminal=False, lists=True),
    Metric("rndcg", "rndcg", "rndcg", m.ndcg_at_r_levels, "nDCG (mean at R levels)", "nDCG (mean at R levels)",
           default=False, terminal=False, lists=True, needs=("n_retrieved",), average=m.ndcg_at_r_levels_tied),
    Metric("dcg", "dcg", "dcg", m.dcg, "DCG", "DCG", default=False, terminal=False, lists=True, average=m.dcg_tied,
           params=DCG_PARAMS, setting=partial(m.discounted, normalised=False, cut=False)),
    Metric("dcg@k", "dcg_at_{k}", "dcg_at_{k}", m.dcg_at, "DCG@{k}", "DCG@{k}", parameter="ks", default=False,
           terminal=False, lists=True, average=m.dcg_at_tied, params=DCG_PARAMS,
           setting=partial(m.discounted, normalised=False, cut=True)),
    Metric("relative_p@k", "relative_p_at_{k}", "relative_p_at_{k}", m.relative_precision_at, "relative P@{k}",
           "relative P@{k}", parameter="ks", section="cutoff", default=False, terminal=False,
           average=m.relative_precision_at_tied),
)

#: summary figures that are not per-query metrics (open set), with the direction a gate on them takes
SUMMARY_FIGURES: dict[str, Direction] = {
    "rejection_accuracy": "higher", "fpir": "lower", "fnir": "lower", "fnir_at_target_fpir": "lower",
}

BY_NAME: dict[str, Metric] = {x.name: x for x in METRICS}


@dataclass(frozen=True)
class Column:
    """A metric at one cut-off (``k`` None for a metric without one): one per-query column of a run."""

    metric: Metric
    k: int | None = None

    def _fill(self, pattern: str) -> str:
        return pattern.replace(K, str(self.k))

    @property
    def name(self) -> str:
        """The per-query column: ``recall_at_5``."""
        return self._fill(self.metric.column)

    @property
    def summary(self) -> str | None:
        """The summary column: ``map`` for ``ap``; None for a per-query-only metric."""
        return None if self.metric.summary is None else self._fill(self.metric.summary)

    @property
    def spec(self) -> str:
        """The name ``metrics=`` takes for it: ``recall@5``."""
        return self.metric.name if self.k is None else f"{self.metric.base}@{self.k}"

    def compute(self, indptr: np.ndarray, ranks: np.ndarray, n_relevant: np.ndarray,
                lists: RankLists | None = None, average: bool = False) -> np.ndarray:
        """The values per query; a metric that reads ``lists`` gets them (binary ones from the ranks if None);
        ``average``: its function under --ties average (``Metric.average``), which reads the lists."""
        args: tuple = (indptr, ranks, n_relevant)
        function = self.metric.function
        if average and self.metric.average is not None:
            function = self.metric.average
        if self.metric.lists or function is not self.metric.function:
            args = (lists if lists is not None else binary_lists(indptr, ranks, n_relevant),)
        return function(*args) if self.metric.parameter is None else function(*args, self.k)


# --------------------------------------------------------------------------- names


def _regex(pattern: str) -> re.Pattern:
    return re.compile("^" + r"([0-9]+)".join(re.escape(part) for part in pattern.split(K)) + "$")


#: (regex, metric, is the summary column) for every column pattern; summary patterns first
_COLUMNS = [(_regex(x.summary), x, True) for x in METRICS if x.summary is not None] + \
           [(_regex(x.column), x, False) for x in METRICS]
#: spellings ``metrics=`` takes: the name, the per-query column and the summary column, without a cut-off
_EXACT = {s: x for x in METRICS if x.parameter is None for s in (x.name, x.column, x.summary) if s}
_BASES = {s.split(K)[0].removesuffix("_at_").removesuffix("@").removesuffix("_"): x
          for x in METRICS if x.parameter is not None for s in (x.name.replace("@k", "@{k}"), x.column, x.summary) if s}
#: the registered names with ``@k`` of the --ks metrics (``recall@k``, ``ndcg@k``): the metric at every --ks
_AT_EVERY_K = {x.name: x for x in METRICS if x.parameter == "ks"}
_WITH_K = re.compile(r"^(.+?)(?:@|_at_|_)([0-9]+)$")


def _match(name: str) -> tuple[Column, bool] | None:
    for regex, metric, is_summary in _COLUMNS:
        found = regex.match(name)
        if found:
            k = int(found.group(1)) if metric.parameter is not None else None
            if k is not None and (k < 1 or str(k) != found.group(1)):
                continue
            return Column(metric, k), is_summary
    setting = _setting(name, ("summary", "column"))
    return (Column(setting[0], setting[1]), setting[2] == "summary") if setting is not None else None


def lookup(name: str) -> Column | None:
    """The metric column a per-query or summary column name is (``map_at_5`` -> map@k at 5), or None."""
    found = _match(name)
    return found[0] if found else None


def label(name: str) -> str | None:
    """The display label of a per-query or summary metric column (``mAP@5``), or None."""
    found = _match(name)
    if not found:
        return None
    column, is_summary = found
    text = column.metric.summary_label if is_summary and column.metric.summary_label else column.metric.label
    return column._fill(text)


def direction(name: str) -> Direction | None:
    """Which way is better for a summary (or per-query) column: a metric's, an open-set figure's, or None."""
    if name in SUMMARY_FIGURES:
        return SUMMARY_FIGURES[name]
    column = lookup(name)
    return column.metric.direction if column else None


def known_names() -> list[str]:
    """Every name ``metrics=`` takes, as ``evalcore metrics`` lists them (``recall@k``)."""
    return [x.name for x in METRICS]


# --------------------------------------------------------------------------- parameters


#: the plain metrics that declare parameters (``Metric.params``), in registry order
_PLAIN = tuple(x for x in METRICS if x.params and x.family is None)
#: each plain metric's place in report order for the settings made of it: after its last registered setting
_FAMILY_LAST = {x.name: max(i for i, y in enumerate(METRICS) if y is x or y.family == x.name) for x in _PLAIN}
#: the settings made when a process first meets them (``_bind``): the same record each time and in every process
_MADE: dict[str, Metric] = {}


def _split(pattern: str) -> tuple[str, str]:
    """(head, tail) of a name or column pattern: a setting's text goes between them, before the cut-off
    (``ndcg`` + ``_exp`` + ``_at_{k}``; ``rbp`` + ``_0.73`` + ``""``)."""
    for tail in ("@k", f"_at_{K}", f"@{K}", f"_{K}"):
        if pattern.endswith(tail):
            return pattern.removesuffix(tail), tail
    return pattern, ""


def _with_setting(pattern: str, plain: Metric, bound: Sequence[tuple[str, Value]]) -> str:
    """A name or column pattern of ``plain`` at the setting ``bound``: each value not its default, in the order of
    the declarations (``ndcg_exp_avg_base10_at_{k}``)."""
    head, tail = _split(pattern)
    values = dict(bound)
    return head + "".join(p.text(values[p.name]) for p in plain.params if p.name in values) + tail


def _tail_regex(tail: str) -> str:
    return "" if not tail else "@([0-9]+|k)" if tail == "@k" else re.escape(tail.split(K)[0]) + "([0-9]+)"


#: (regex, plain metric, what it matches: "name", "column" or "summary") for the settings of every plain metric
#: with parameters: a group per parameter's text, then the cut-off's
_SETTINGS: list[tuple[re.Pattern, Metric, str]] = [
    (re.compile("^" + re.escape(_split(pattern)[0]) + "".join(p.pattern for p in x.params)
                + _tail_regex(_split(pattern)[1]) + "$"), x, kind)
    for x in _PLAIN for kind, pattern in (("summary", x.summary), ("column", x.column), ("name", x.name)) if pattern]


def _bind(metric: Metric, values: Mapping[str, Value]) -> Metric:
    """``metric`` with ``values`` bound besides those it binds: the plain metric where every value is its default,
    the registered record of that setting where there is one (``ndcg(gain=exp)``: ``ndcg_exp``), else a record
    made here, the same each time and in any process that builds it from its name or column (``_made``)."""
    plain = BY_NAME[metric.family] if metric.family is not None else metric
    merged = {**dict(metric.bound), **values}
    bound = tuple((p.name, merged[p.name]) for p in plain.params if p.name in merged and merged[p.name] != p.default)
    if not bound:
        return plain
    name = _with_setting(plain.name, plain, bound)
    if name in BY_NAME:
        return BY_NAME[name]
    if name not in _MADE:
        _MADE[name] = _made(plain, bound)
    return _MADE[name]


def _made(plain: Metric, bound: tuple[tuple[str, Value], ...]) -> Metric:
    """The record of a setting that is not registered: ``plain``'s, with the setting's name, columns and labels,
    its function (``plain.setting``), the function's form under --ties average where ``plain`` has one, and what
    the function needs of the lists besides ``plain``'s needs."""
    if plain.setting is None:
        raise ValueError(f"{plain.name} declares parameters but no setting function")
    column = _with_setting(plain.column, plain, bound)
    function = plain.setting(column, **dict(bound))
    tied = getattr(function, "tied", None)
    words = ", ".join(p.words(dict(bound)[p.name]) for p in plain.params if p.name in dict(bound))

    def label(text: str | None) -> str | None:
        # the plain label less the default it names (RBP (p 0.9)), then the setting's words: RBP (p 0.73)
        return None if text is None else re.sub(r" \([^()]*\)$", "", text) + f" ({words})"

    return dataclasses.replace(
        plain, name=_with_setting(plain.name, plain, bound), column=column,
        summary=None if plain.summary is None else _with_setting(plain.summary, plain, bound), function=function,
        label=label(plain.label) or plain.label, summary_label=label(plain.summary_label),
        average=tied() if plain.average is not None and tied is not None else None,
        needs=tuple(dict.fromkeys((*plain.needs, *getattr(function, "needs", ())))), default=False, terminal=False,
        cmc=False, bound=bound, family=plain.name, setting=None)


def _setting(name: str, kinds: Sequence[str]) -> tuple[Metric, int | None, str] | None:
    """(metric, k, kind) of a setting's name (``dcg_exp@5``, ``dcg_exp@k``: k None), per-query or summary column
    (``dcg_exp_base10_at_5``, ``rbp_0.73``), spelt exactly as the setting's record spells it; else None."""
    for regex, plain, kind in _SETTINGS:
        found = regex.match(name) if kind in kinds else None
        if not found:
            continue
        groups = found.groups()
        texts, cut = (groups[:-1], groups[-1]) if plain.parameter is not None else (groups, None)
        try:
            values = {p.name: p.read(t) for p, t in zip(plain.params, texts) if t is not None}
        except ValueError:
            continue
        if not values:
            continue
        metric = _bind(plain, values)
        k = None if cut in (None, "k") else int(cut)
        if k is not None and k < 1:
            continue
        column = Column(metric, k)
        spelt = {"name": metric.name if cut == "k" else column.spec, "column": column.name,
                 "summary": column.summary}[kind]
        if spelt == name:
            return metric, k, kind
    return None


def _takes(metric: Metric) -> str:
    """What a message says ``metric`` takes: ``ndcg takes gain = linear | exp (default linear); ...``."""
    if not metric.unbound:
        return f"{metric.name} takes no other parameters"
    return f"{metric.name} takes {'; '.join(str(p) for p in metric.unbound)}"


def _index(metric: Metric) -> tuple[int, int, tuple[float, ...]]:
    """The metric's place in report order: its registration's; a setting made here comes after its plain
    metric's registered settings, in the order of its values."""
    if metric.family is not None and metric.name not in BY_NAME:
        plain = BY_NAME[metric.family]
        values = dict(metric.bound)
        key = tuple(float(p.choices.index(str(v))) if p.choices else float(v)
                    for p in plain.params for v in [values.get(p.name, p.default)])
        return _FAMILY_LAST[plain.name], 1, key
    return METRICS.index(metric), 0, ()


#: a name with parameters, as ir_measures spells them: ``ndcg(gain=exp)``, ``ndcg_exp(base=10)``, then ``@k`` if any
_CALL = re.compile(r"^([a-z_0-9.]+)\(([^()]*)\)(@[0-9]+|@k)?$")


def _bare(name: str, cut: bool) -> Metric | None:
    """The metric a name before ``(...)`` is: with a cut-off after the call, the one that takes k (``ndcg@k``)."""
    if cut:
        found = _BASES.get(name)
        setting = _setting(name + "@k", ("name",)) if found is None else None
        return found or (setting[0] if setting else None)
    found = _EXACT.get(name) or (_BASES[name] if name in _BASES and _BASES[name].parameter == "ks" else None)
    setting = _setting(name, ("name", "column")) if found is None else None
    return found or (setting[0] if setting else None)


def _call(raw: str, name: str, params: str, cut: str | None, option: str) -> tuple[Metric, int | None]:
    """(metric, k) of ``name(key=value, ...)`` and ``name(...)@k``: every key one the metric declares and does
    not bind already, each value one it takes (quotes, spaces and the keys' order do not matter)."""
    metric = _bare(name, cut is not None)
    if metric is None:
        uncut = _bare(name, False) if cut is not None else None
        if uncut is not None:
            raise input_error(option, f"{raw!r}: {uncut.name} takes no cut-off")
        raise input_error(option, f"{raw!r}: no metric is called {name!r} (evalcore metrics lists the metrics and "
                                  "their parameters)")
    if not metric.params:
        takers = ", ".join(x.name for x in _PLAIN)
        raise input_error(option, f"{raw!r}: {metric.name} takes no parameters ({takers} do: evalcore metrics "
                                  "lists them)")
    declared = {p.name: p for p in metric.params}
    given: dict[str, str] = {}
    for part in params.replace(" ", "").split(","):
        key, equals, text = part.partition("=")
        text = text.strip("'\"")
        if not key or not equals or not text:
            raise input_error(option, f"{raw!r}: give each parameter as key=value; {_takes(metric)}")
        if key in given:
            raise input_error(option, f"{raw!r}: {key} is given twice; {_takes(metric)}")
        given[key] = text
    values: dict[str, Value] = {}
    for key, text in given.items():
        if key in spellings.RUN_PARAMETERS and key not in declared:
            raise input_error(option, f"{raw!r}: evalcore sets {key} for the whole run: "
                              + spellings.RUN_PARAMETERS[key])
        if key not in declared:
            raise input_error(option, f"{raw!r}: {metric.name} has no parameter {key!r}; {_takes(metric)}")
        if key in dict(metric.bound):
            plain = BY_NAME[metric.family or metric.name]
            other = f"{plain.base}({key}=...){'@k' if plain.parameter else ''}"
            raise input_error(option, f"{raw!r}: {metric.name} is {key}={dict(metric.bound)[key]} already: write "
                                      f"{other}" + (f"; {_takes(metric)}" if metric.unbound else ""))
        try:
            values[key] = declared[key].value(text)
        except ValueError as exc:
            raise input_error(option, f"{raw!r}: {exc}; {_takes(metric)}") from None
    bound = _bind(metric, values)
    if cut is None or cut == "@k":
        return bound, None
    k = int(cut[1:])
    if k < 1:
        raise input_error(option, f"{raw!r}: the cut-off must be a positive integer")
    return bound, k


def parse(text: str, option: str = "--metrics") -> tuple[Metric, int | None]:
    """(metric, k) of a name ``metrics=`` takes; k None: no cut-off, or every value of its option.

    ``map``, ``ap`` (its per-query column), ``recall@5``, ``recall_at_5``,
    ``map@100`` (= ``map_at_100``, ``ap_at_100``), ``recall`` or ``recall@k`` (at every --ks; ``ndcg@k``
    and ``mrr@k`` so spelt, as ``ndcg`` and ``mrr`` are the uncut measures); case does not matter. A metric's
    parameters (``Metric.params``) as ``nDCG(gain=exp)@10`` (``ndcg_exp@10``), ``dcg(gain=exp, base=10)``,
    ``RBP(p=0.73)``, and a setting's own name or column (``dcg_exp_base10@5``, ``rbp_0.73``). Anything else is an
    InputError naming ``option``.
    """
    raw = str(text).strip()
    try:   # a field's own spelling first, as that field writes it (P.5, AP@100, hit_rate@10): core.spellings
        spelt = spellings.evalcore_name(raw)
    except spellings.Refused as exc:
        raise input_error(option, f"{raw!r}: " + exc.why) from None
    name = (spelt or raw).lower()
    call = _CALL.match(name.replace(" ", "")) if "(" in name else None
    if call:
        return _call(raw, call.group(1), call.group(2), call.group(3), option)
    if name in _EXACT:
        return _EXACT[name], None
    if name in _AT_EVERY_K:
        return _AT_EVERY_K[name], None
    found = _WITH_K.match(name)
    if found and (found.group(1) in _BASES or found.group(1) in _EXACT):
        base, k = found.group(1), int(found.group(2))
        if base not in _BASES:
            raise input_error(option, f"{raw!r}: {_EXACT[base].name} takes no cut-off")
        if k < 1:
            raise input_error(option, f"{raw!r}: the cut-off must be a positive integer")
        return _BASES[base], k
    if name in _BASES and _BASES[name].parameter == "ks":
        return _BASES[name], None
    setting = _setting(name, ("name", "column", "summary"))
    if setting is not None:
        return setting[0], setting[1]
    raise UnknownNameError(option, raw, f"unknown metric {raw!r}; known: {', '.join(known_names())} "
                     "(evalcore metrics describes them)")


def canonical(metric: Metric, k: int | None) -> str:
    """How ``select`` spells (metric, k): ``recall@5``; ``recall`` for every --ks, ``ndcg@k`` where the bare
    base (``ndcg``) names another metric, as it does for a setting (``dcg_exp@k``: ``dcg_exp`` is dcg(gain=exp))."""
    if k is None and metric.parameter is not None:
        return metric.name if metric.base in _EXACT or metric.family is not None else metric.base
    return Column(metric, k).spec


def select(names: str | Iterable[str], option: str = "--metrics") -> tuple[str, ...]:
    """The names checked and spelt as ``evalcore metrics`` lists them, each once (``ap,recall_at_5`` ->
    ``map, recall@5``); a comma-separated string is split. InputError naming ``option`` for a bad one."""
    given: list = names.split(",") if isinstance(names, str) else \
        list(names) if isinstance(names, Iterable) and not isinstance(names, (bytes, Mapping)) else [None]
    if any(not isinstance(n, str) for n in given):
        raise input_error(option, "give metric names as a list of strings or a comma-separated string")
    items = [n for n in given if n.strip()]
    if not items:
        raise input_error(option, "give at least one metric name (evalcore metrics lists them)")

    def checked(name: str) -> str:
        try:
            return canonical(*parse(name, option))
        except InputError as exc:
            # a mistyped name: the closest spelling parse takes, its cut-off kept (ndgc@10 -> ndcg@10)
            raw = name.strip()
            found = _WITH_K.match(raw.lower())
            base, cut = (found.group(1), "@" + found.group(2)) if found else (raw.lower(), "")
            close = difflib.get_close_matches(base, sorted({*_EXACT, *_BASES, *known_names()}), n=1)
            if not isinstance(exc, UnknownNameError) or not close:
                raise
            guess = close[0] + cut if close[0] in _BASES else close[0]
            try:
                parse(guess)
            except InputError:
                raise exc from None
            raise input_error(option, f"unknown metric {raw!r} (did you mean {guess!r}?); known: "
                             f"{', '.join(known_names())} (evalcore metrics describes them)") from None

    return tuple(dict.fromkeys(checked(n) for n in items))


# --------------------------------------------------------------------------- the columns of a run


def _order(column: Column) -> tuple:
    metric = column.metric
    group = 0 if metric.parameter is None else 1 + PARAMETERS.index(metric.parameter)
    return group, column.k or 0, _index(metric)


def run_columns(metrics: Sequence[str] | None, ks: Sequence[int], map_at: int | None,
                first_rank: bool = False, ties: str = "pessimistic") -> list[Column]:
    """The per-query metric columns of a run, in report order.

    ``metrics`` None: every default metric, those with a cut-off at each value of
    their option (``ks``; ``map_at`` when given). Else the named ones: ``recall@5``
    at 5, ``recall`` at each of ``ks``; ``map_at``, when given, adds map@K either
    way. ``first_rank=True`` adds ``first_rank`` (the engine needs it for the CMC,
    the open-set outcome and the sweep; under --ties average it stays the engine's,
    from the pessimistic ranks, and is never reported). ``ties="average"``: the
    default set is its metrics defined there (``Metric.average``); a named one
    that is not is an OptionError (``check_ties``).
    """
    average = ties == "average"
    if average:
        check_ties(metrics, map_at, ties)
    def at(metric: Metric, k: int | None) -> list[Column]:
        if metric.parameter is None or k is not None:
            return [Column(metric, k)]
        values = ks if metric.parameter == "ks" else ([map_at] if map_at else [])
        return [Column(metric, int(v)) for v in values]

    chosen: list[Column] = []
    if metrics is None:
        for metric in METRICS:
            if metric.default and (not average or metric.average is not None):
                chosen += at(metric, None)
    else:
        for text in metrics:
            chosen += at(*parse(text))
        if map_at:
            chosen += [Column(x, int(map_at)) for x in METRICS if x.parameter == "map_at"]
    if first_rank:
        chosen.append(Column(BY_NAME["first_rank"]))
    return sorted(set(chosen), key=_order)


#: what the refusals under --ties average say about why (README, Metrics: ties)
AVERAGE_WHY = ("tied items share their gains there, which defines only the measures that add up a gain per place ("
               + mention("evalcore metrics --ties average") + " lists them)")


def undefined_under_average(metrics: Sequence[str] | None, map_at: int | None = None) -> list[str]:
    """The names among ``metrics`` (as ``select`` spells them; None: the default set) whose metric has no
    --ties average form (``Metric.average``), each once, plus ``map@K`` for ``map_at``."""
    if metrics is None:   # as the default set has them: every --ks, map@K only with --map-at (added below)
        out = [x.name for x in METRICS if x.default and x.average is None and x.parameter != "map_at"]
    else:
        out = [name for name in metrics if parse(name)[0].average is None]
    if map_at:
        out.append(f"map@{map_at}")
    return list(dict.fromkeys(out))


def check_ties(metrics: Sequence[str] | None, map_at: int | None, ties: str) -> None:
    """Under --ties average, an OptionError naming the asked-for metrics it does not define (``--metrics``) or
    ``--map-at``; the default set is cut to the defined ones instead (``run_columns``)."""
    if ties != "average":
        return
    named = undefined_under_average(metrics) if metrics is not None else []
    if named:
        raise OptionError("--metrics", f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} not defined under "
                          + mention("--ties") + " average: " + AVERAGE_WHY + "; use " + mention("--ties")
                          + f" pessimistic or optimistic for {'it' if len(named) == 1 else 'them'}")
    if map_at:
        raise OptionError("--map-at", f"map@{map_at} is not defined under " + mention("--ties") + " average: "
                          + AVERAGE_WHY)


def summary_names(metrics: Sequence[str] | None, ks: Sequence[int], map_at: int | None,
                  ties: str = "pessimistic") -> list[str]:
    """The metric columns a run's summary has (``map``, ``hit_at_1``, ...), in order; the counts and the
    open-set figures (``SUMMARY_FIGURES``, with a threshold) come besides. For checks of names in job files."""
    return [c.summary for c in run_columns(metrics, ks, map_at, ties=ties) if c.summary is not None]


def summary_columns(metrics: Sequence[str] | None, ks: Sequence[int], map_at: int | None = None,
                    threshold: float | None = None, target_fpir: float | None = None,
                    ties: str = "pessimistic") -> list[str]:
    """Every column of the summary a run with these options writes, ``group`` left out, in order.

    Derived from the code that builds them, not listed by hand: the metric
    columns (``summary_names``) through ``metrics.summary_row`` on no queries
    (which adds the counts and, with a threshold, the open-set figures), then
    the target-FPIR columns. The protocol, ties and the other options change
    values, never the columns. What a nightly job file's gates, baselines and
    trend metrics may name.
    """
    columns = [c for c in run_columns(metrics, ks, map_at, ties=ties) if c.summary is not None]
    empty = np.empty(0, dtype=np.float64)
    summaries = {c.name: c.summary for c in columns if c.summary is not None}
    row = m.summary_row({c.name: empty for c in columns}, np.empty(0, np.int64), summaries,
                        None if threshold is None else np.empty(0, dtype=object), threshold)
    return [*row, *(m.TARGET_FPIR_COLUMNS if target_fpir is not None else ())]


def compute(columns: Sequence[Column], indptr: np.ndarray, ranks: np.ndarray, n_relevant: np.ndarray,
            zero_empty: np.ndarray | None = None, lists: RankLists | None = None,
            ties: str = "pessimistic") -> dict[str, np.ndarray]:
    """Every column's per-query values, in the given order (NaN / -1 mark nulls).

    ``zero_empty`` (bool per query): where it holds and R = 0 every metric is 0
    instead of null; ranks (int64) stay null: there is no rank; a metric that is
    defined there keeps its value (nDCG ignores --rel-level). ``lists``: the
    chunk's ``RankLists`` (its binary lists are ``indptr, ranks, n_relevant``).
    ``ties="average"``: each metric's ``average`` from the lists' tie groups (the
    ranks are the pessimistic ones); ``first_rank``, which the engine keeps for
    itself, is the pessimistic one; any other metric without one is an OptionError.
    """
    average = ties == "average"
    if average:
        undefined = [c.spec for c in columns if c.metric.average is None and c.metric is not BY_NAME["first_rank"]]
        if undefined:
            raise OptionError("--metrics", f"{', '.join(dict.fromkeys(undefined))}: not defined under "
                              + mention("--ties") + " average: " + AVERAGE_WHY)
    missing = [c.metric.name for c in columns
               if any(lists is None or not lists.has(need) for need in c.metric.needs)]
    if missing:
        tied = [c.metric.name for c in columns if c.metric.name in missing and "tie_groups" in c.metric.needs]
        tied = list(dict.fromkeys(tied))
        if tied:
            raise OptionError("--metrics", f"{', '.join(tied)} need(s) the tie groups of a precomputed ranking ("
                              + mention(LIST_ITEMS) + " with " + mention(LIST_SCORES)
                              + "): a scan of the whole gallery keeps them under " + mention("--ties") + " average only")
        raise OptionError("--metrics", f"{', '.join(dict.fromkeys(missing))} need(s) to know which retrieved items "
                          "are judged: under qrels, evaluate precomputed rankings (" + mention(LIST_ITEMS) + ") or "
                          + mention("--judged-only") + ", not a scan of the whole gallery")
    out = {c.name: c.compute(indptr, ranks, n_relevant, lists, average) for c in columns}
    if zero_empty is not None:
        zero = np.asarray(zero_empty, dtype=bool) & (np.asarray(n_relevant) == 0)
        for c in columns:
            if c.metric.dtype == "float64":
                out[c.name] = np.where(zero & np.isnan(out[c.name]), 0.0, out[c.name])
    return out


def display_order(names: Iterable[str], section: Section | None = None, terminal: bool = False) -> list[str]:
    """The registered summary columns among ``names`` in display order: metrics without a cut-off in
    registry order, then each metric with one, k ascending; optionally of one section or terminal ones."""
    found = []
    for name in names:
        hit = _match(name)
        if hit and hit[1]:
            metric = hit[0].metric
            if (section is None or metric.section == section) and (not terminal or metric.terminal):
                found.append((metric.parameter is not None, _index(metric), hit[0].k or 0, name))
    return [name for *_, name in sorted(found)]


# --------------------------------------------------------------------------- listing


@dataclass(frozen=True)
class MetricInfo:
    """One line of ``evalcore metrics`` / ``evalcore.metric_names()``."""

    name: str
    column: str
    summary: str | None
    direction: Direction
    definition: str
    #: the parameters it takes (``Param``: name, default, allowed values, description), after its definition on
    #: its line: ``[gain = linear | exp (default linear); base = a number > 1 (default 2)]``
    params: tuple[Param, ...] = ()

    @property
    def columns(self) -> str:
        if self.summary is None:
            return f"{self.column} (per query)"
        return self.column if self.summary == self.column else f"{self.column} -> {self.summary}"

    def __str__(self) -> str:
        # widths from every registered metric, so the direction column lines up however long a name is
        name_width, columns_width = _listing_widths()
        params = f"  [{'; '.join(str(p) for p in self.params)}]" if self.params else ""
        return (f"{self.name:<{name_width}} {self.columns:<{columns_width}} {self.direction + ' is better':<17} "
                f"{self.definition}{params}")


def _listing_widths() -> tuple[int, int]:
    infos = describe()
    return max(12, *(len(i.name) for i in infos)), max(26, *(len(i.columns) for i in infos))


def describe(ties: str = "pessimistic") -> list[MetricInfo]:
    """Every registered metric: name, per-query and summary column patterns, direction, definition, and the
    parameters it takes (``Metric.unbound``; a setting of them is named as ``Metric.params`` says).
    ``ties="average"``: the metrics defined under --ties average, each with its definition there (the first
    line of its ``average``'s docstring)."""
    if ties == "average":
        return [MetricInfo(x.name, x.column, x.summary, x.direction, x.average_definition or "", x.unbound)
                for x in METRICS if x.average is not None]
    return [MetricInfo(x.name, x.column, x.summary, x.direction, x.definition, x.unbound) for x in METRICS]
