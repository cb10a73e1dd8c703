"""Measure names in each field's own spelling, and the evalcore metric each one is (README, Metrics by name).

``metrics=``, ``--metrics``, ``compare --metrics``, a nightly job's ``metrics`` and ``evalcore trec -m`` take
a measure as trec_eval, ir_measures and ranx spell it, as well as in evalcore's own words:

    trec_eval    P.5  P_5  ndcg_cut.10  map_cut.100  recall.1000  success.10  recip_rank  Rprec  rbp.p=0.8
    ir_measures  P@5  R@100  AP  AP@100  RR@10  nDCG@10  nDCG(dcg='exp-log2')@10  Success@10  NumRelRet
                 SetP  IPrec@0.5  Judged@10  ERR@20  RBP(p=0.8)
    ranx         hit_rate@10  r-precision  ndcg_burges@10  dcg_burges@10  (the rest are evalcore's names already)

A field's spelling is matched as that field writes it (case counts: ``AP@100`` is ir_measures' AP cut at 100,
trec_eval's map_cut_100, with 1/R in front; evalcore's own ``map@100`` is the landmark mAP@100, 1/min(R, 100));
what matches none of them goes on to evalcore's names, whose case does not matter. A spelling whose definition
differs from every evalcore metric (ranx's ``hits@k``, a count; ranx's graded ``rbp.95``) or a per-measure
parameter that evalcore sets for the whole run (ir_measures' ``rel=``, ``judged_only=``) is an input error that
says what to write instead. Translation only: each name here is an evalcore metric's, computed once by its one
function (``core.metrics``) through its one record (``core.registry``).

Plain data and string work, no numpy: ``core.registry`` and the trec_eval command (``trec_api``) read it.
"""
from __future__ import annotations

import re

from evalcore.errors import Words, mention

#: trec_eval measure -> (evalcore metric, its per-query column); ``{k}``: a cut-off, ``{level}``: a fixed level.
#: ``evalcore trec`` computes each through this table; ``metrics=`` takes ``P.5``/``P_5`` through it too.
TREC_EVAL: dict[str, tuple[str, str]] = {
    "num_ret": ("num_ret", "num_ret"),
    "num_rel": ("num_rel", "num_rel"),
    "num_rel_ret": ("num_rel_ret", "num_rel_ret"),
    "map": ("map", "ap"),
    "Rprec": ("rprec", "rprec"),
    "bpref": ("bpref", "bpref"),
    "recip_rank": ("mrr", "rr"),
    "iprec_at_recall": ("iprec_at_recall_{level}", "iprec_at_recall_{level}"),
    "P": ("precision@{k}", "precision_at_{k}"),
    "recall": ("recall@{k}", "recall_at_{k}"),
    "Rprec_mult": ("rprec_mult_{level}", "rprec_mult_{level}"),
    "utility": ("utility", "utility"),
    "11pt_avg": ("11pt_avg", "11pt_avg"),
    "ndcg": ("ndcg", "ndcg"),
    "ndcg_cut": ("ndcg@{k}", "ndcg_at_{k}"),
    "map_cut": ("map_cut@{k}", "ap_cut_{k}"),
    "relative_P": ("relative_p@{k}", "relative_p_at_{k}"),
    "success": ("hit@{k}", "hit_at_{k}"),
    "set_P": ("set_p", "set_p"),
    "set_relative_P": ("set_relative_p", "set_relative_p"),
    "set_recall": ("set_recall", "set_recall"),
    "set_map": ("set_map", "set_map"),
    "set_F": ("set_f", "set_f"),
    "num_nonrel_judged_ret": ("num_nonrel_judged_ret", "num_nonrel_judged_ret"),
    "rbp": ("rbp", "rbp"),
    "rbp_resid": ("rbp_resid", "rbp_resid"),
    "unj": ("unj@{k}", "unj_at_{k}"),
    "infAP": ("infap", "infap"),
    "binG": ("bing", "bing"),
    "G": ("g", "g"),
    "ndcg_rel": ("ndcg_rel", "ndcg_rel"),
    "Rndcg": ("rndcg", "rndcg"),
}

#: ir_measures' measure names (``measures/*.py``'s NAME) -> evalcore's, without and with a cut-off (``@k``);
#: None where ir_measures' name needs (or refuses) one
IR_MEASURES: dict[str, tuple[str | None, str | None]] = {
    "P": (None, "precision@{k}"),
    "R": (None, "recall@{k}"),
    "AP": ("map", "map_cut@{k}"),
    "RR": ("mrr", "mrr@{k}"),
    "nDCG": ("ndcg", "ndcg@{k}"),
    "Success": (None, "hit@{k}"),
    "Judged": (None, "judged@{k}"),
    "ERR": (None, "err@{k}"),
    "Rprec": ("rprec", None),
    "Bpref": ("bpref", None),
    "infAP": ("infap", None),
    "NumRel": ("num_rel", None),
    "NumRet": ("num_ret", None),
    "NumRelRet": ("num_rel_ret", None),
    "SetP": ("set_p", None),
    "SetR": ("set_recall", None),
    "SetF": ("set_f", None),
    "SetAP": ("set_map", None),
}
#: ir_measures' nDCG(dcg=...) formulations -> evalcore's nDCG of that gain
IR_MEASURES_DCG = {"log2": "ndcg", "exp-log2": "ndcg_exp"}

#: ranx's metric names that evalcore spells otherwise (ranx's others are evalcore's names, same definitions);
#: ranx's dcg_burges, sum_i (2^g_i - 1) / log2(i + 1), is evalcore's dcg with exponential gain
RANX: dict[str, str] = {"hit_rate": "hit", "r-precision": "rprec", "ndcg_burges": "ndcg_exp",
                        "dcg_burges": "dcg(gain=exp)"}

#: spellings that name a measure evalcore computes otherwise: what to write instead
NOT_THE_SAME: dict[str, str] = {
    "hits": "ranx's hits@k counts the relevant items in the top k: that is precision@k times k "
            "(evalcore.compat.ranx computes hits@k as ranx does)",
    "f1": "ranx's f1@k is the harmonic mean of precision@k and recall@k, not a registered metric "
          "(evalcore.compat.ranx computes it as ranx does)",
    "rbp.": "ranx's rbp.95 gains each document's grade, not grade / highest grade; evalcore.compat.ranx "
            "computes it as ranx does (evalcore's RBP(p=0.95) is Moffat and Zobel's, as trec_eval's)",
}
#: ir_measures' per-measure parameters that evalcore sets for the whole run: the option to use instead
RUN_PARAMETERS: dict[str, Words] = {"rel": mention("--rel-level"), "judged_only": mention("--judged-only"),
                                    "gains": "the grades of " + mention("qrels/rel"), "cutoff": "@k after the name"}

_TREC_CUT = re.compile(r"^([A-Za-z_]+?)[._]([0-9]+)$")
_TREC_RBP = re.compile(r"^(rbp|rbp_resid)\.p=([^,]*)$")
_IR = re.compile(r"^([A-Za-z]+)(?:\(([^()]*)\))?(?:@([0-9.]+))?$")
_RANX = re.compile(r"^([a-z0-9_-]+?)(@[0-9]+)?$")


class Refused(ValueError):
    """A field's spelling that evalcore does not take as such: ``why`` says what to write instead."""

    def __init__(self, why: Words) -> None:
        super().__init__(str(why))
        self.why = why


def evalcore_name(text: str) -> str | None:
    """The evalcore name (``precision@5``, ``ndcg_exp@10``, ``rbp(p=0.8)``) a field's spelling of a measure
    is, None when ``text`` is no field's spelling (evalcore's own names are left to ``core.registry``).

    Refused where the field's measure is not the evalcore metric of that name (see ``NOT_THE_SAME``,
    ``RUN_PARAMETERS``)."""
    name = text.strip()
    for spelt in (_trec_eval(name), _ir_measures(name), _ranx(name)):
        if spelt is not None:
            return spelt
    return None


def _trec_eval(name: str) -> str | None:
    """trec_eval's ``P.5`` / ``P_5`` (as it prints it), ``recip_rank``, ``rbp.p=0.8``; bare ``P``: every --ks."""
    rbp = _TREC_RBP.match(name)
    if rbp:
        return f"{rbp.group(1)}(p={rbp.group(2)})"
    cut = _TREC_CUT.match(name)
    if cut and "{k}" in TREC_EVAL.get(cut.group(1), ("", ""))[0]:
        return TREC_EVAL[cut.group(1)][0].replace("{k}", cut.group(2))
    measure = name.partition(".")[0]
    if "." in name and "{k}" in TREC_EVAL.get(measure, ("", ""))[0]:   # P.5,10: trec_eval's list of cut-offs
        raise Refused(f"give one cut-off a name: {measure}.5, {measure}.10")
    found = TREC_EVAL.get(name)
    if found is None or "{level}" in found[0]:
        return None
    return found[0].replace("{k}", "k")


def _ir_measures(name: str) -> str | None:
    """ir_measures' ``P@5``, ``AP@100`` (trec_eval's map_cut), ``nDCG(dcg='exp-log2')@10``, ``IPrec@0.5``."""
    found = _IR.match(name)
    if not found:
        return None
    measure, params, cut = found.groups()
    if measure == "IPrec" and cut is not None and params is None:
        try:
            level = float(cut)
        except ValueError:
            return None
        if level * 10 != round(level * 10) or not 0 <= level <= 1:
            raise Refused("evalcore computes IPrec at recall 0.0, 0.1, ..., 1.0 only (trec_eval's levels)")
        return f"iprec_at_recall_{level:.2f}"
    if measure == "RBP" and params is not None:
        return None   # RBP(p=0.8): evalcore's own parameter spelling (core.registry)
    if measure not in IR_MEASURES and not (measure == "nDCG" and params):
        return None
    if cut is not None and not cut.isdigit():
        return None
    if params:
        return _ir_parameters(measure, params, cut)
    plain, with_k = IR_MEASURES[measure]
    if cut is None:
        return plain   # None: evalcore's own reading of the bare name (Judged: judged@k at every --ks)
    if with_k is None:
        raise Refused(f"{measure} takes no cut-off")
    return with_k.replace("{k}", cut)


def _ir_parameters(measure: str, params: str, cut: str | None) -> str | None:
    """ir_measures' ``nDCG(dcg='exp-log2')``; a per-measure ``rel=``/``judged_only=`` is a run option here."""
    pairs = dict(part.partition("=")[::2] for part in params.replace(" ", "").split(","))
    for key in pairs:
        if key in RUN_PARAMETERS:
            raise Refused(f"{measure}({key}=...): evalcore sets {key} for the whole run: " + RUN_PARAMETERS[key])
    if measure != "nDCG" or set(pairs) != {"dcg"}:
        return None
    dcg = pairs["dcg"].strip("'\"")
    if dcg not in IR_MEASURES_DCG:
        raise Refused(f"nDCG(dcg={dcg!r}): evalcore computes dcg='log2' and dcg='exp-log2'")
    return IR_MEASURES_DCG[dcg] + (f"@{cut}" if cut else "")


def _ranx(name: str) -> str | None:
    """ranx's ``hit_rate@10``, ``r-precision``, ``ndcg_burges@10``, ``dcg_burges@10`` (``dcg(gain=exp)@10``);
    refused where ranx's definition differs."""
    if re.match(r"^rbp\.[0-9]+$", name):
        raise Refused(NOT_THE_SAME["rbp."])
    found = _RANX.match(name)
    if not found:
        return None
    base, cut = found.group(1), found.group(2) or ""
    if base in NOT_THE_SAME:
        raise Refused(NOT_THE_SAME[base])
    if base not in RANX:
        return None
    if base == "hit_rate" and not cut:
        raise Refused("ranx's hit_rate needs a cut-off here: hit_rate@10")
    return RANX[base] + cut
