"""trec_eval's infAP, binG, G, ndcg_rel and Rndcg (issue 38): ``evalcore trec``, ``evalcore.trec``, ``all_trec`` and
pytrec_eval's ``RelevanceEvaluator`` against trec_eval's own numbers and a brute-force reference.

Expected values, by source:

- ``PUBLISHED``: trec_eval's published test outputs (usnistgov/trec_eval, commit f425365, ``test/out.test.aq``
  = ``-m all_trec -q qrels.test results.test``, ``out.test.aqc`` = ``-c`` on ``results.trunc``,
  ``out.test.aqcM`` = ``-c -M100``, ``out.test.aql`` = ``-l2`` on ``qrels.rel_level``), the lines of the five
  measures copied by hand, query by query then ``all`` (the inputs are tests/fixtures/trec/).
- ``FULL``: the same commands printed in full precision by trec_eval built from that commit (10.0-rc3) with
  ``make``, its two print files' "%6.4f" changed to "%.17g" (in /tmp only; not committed).
- ``RANDOM``: trec_eval 9.0.8 (tag v9.0.8, commit d95ca64e), built and patched the same way, run as
  ``trec_eval -q FLAGS -m infAP -m binG -m G -m ndcg_rel -m Rndcg qrels run`` on the files ``make_files()``
  draws (random.Random(38)): grades -2..3 (a negative one: in the pool, not judged), unjudged documents in the
  run, tied scores (broken by docno, descending), q6 / q7 / q8 retrieving R'+1 / R' / R'+2 documents (Rndcg's
  last point), q9 with nothing at -l2, q10 judged without results (-c), q11 never judged, q12 with nothing
  relevant. trec_eval 10 (the build above) prints the same values where it runs (without -c it stops at q10,
  "result qid 'q10' not found in qrels"); with -c 9.0.8 leaves q10 out of the per-query lines and counts it,
  at 0, in ``all``.

Each printed double is written here as Python's shortest repr of the same double; values are compared to
1e-12 (relative). ``references.py`` (tests/core/metrics) holds brute-force versions of the five measures
written from their definitions, checked here on the same runs under trec_eval's rules.
"""
import importlib.util
import math
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from trec_rules import assert_close, by_measure, keywords, trec_rankings

import evalcore
from evalcore import trec_api
from evalcore.compat import pytrec_eval
from evalcore.core import registry

FIXTURES = Path(__file__).parent / "fixtures" / "trec"
CLI = [str(Path(sys.executable).with_name("evalcore"))]
NEW = ("infAP", "binG", "G", "ndcg_rel", "Rndcg")
_spec = importlib.util.spec_from_file_location(
    "metric_references", Path(__file__).parent / "core" / "metrics" / "references.py")
references = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(references)
REFERENCE = {"infAP": references.trec_infap, "binG": references.trec_bing, "G": references.trec_g,
             "ndcg_rel": references.trec_ndcg_rel, "Rndcg": references.trec_rndcg}
#: the published outputs' inputs and flags
COMMANDS = {"aq": ("qrels.test", "results.test", ""), "aqc": ("qrels.test", "results.trunc", "-c"),
            "aqcM": ("qrels.test", "results.trunc", "-c -M100"), "aql": ("qrels.rel_level", "results.test", "-l2")}

PUBLISHED = {
    'aq': {
        'infAP': '0.0324 0.4175 0.0858 0.1785',
        'binG': '0.0238 0.2160 0.1782 0.1393',
        'G': '0.0238 0.2160 0.1782 0.1393',
        'ndcg_rel': '0.1651 0.7130 0.2263 0.3682',
        'Rndcg': '0.1567 0.6196 0.1931 0.3232',
    },
    'aqc': {
        'infAP': '0.0324 0.0000 0.2723 0.1016',
        'binG': '0.0238 0.0000 0.2494 0.0911',
        'G': '0.0238 0.0000 0.2494 0.0911',
        'ndcg_rel': '0.1651 0.0000 0.4285 0.1979',
        'Rndcg': '0.1567 0.0000 0.4182 0.1916',
    },
    'aqcM': {
        'infAP': '0.0118 0.0000 0.2723 0.0947',
        'binG': '0.0102 0.0000 0.2494 0.0865',
        'G': '0.0102 0.0000 0.2494 0.0865',
        'ndcg_rel': '0.0739 0.0000 0.4285 0.1674',
        'Rndcg': '0.0670 0.0000 0.4182 0.1617',
    },
    'aql': {
        'infAP': '0.0003 0.4175 0.1200 0.1792',
        'binG': '0.0101 0.2160 0.1839 0.1367',
        'G': '0.0213 0.1623 0.1783 0.1206',
        'ndcg_rel': '0.1393 0.7130 0.2186 0.3570',
        'Rndcg': '0.0861 0.6196 0.1834 0.2964',
    },
}

FULL = {
    'aq': {
        'infAP': {'301': 0.03242535802486353, '302': 0.41745404847963985, '303': 0.08575578576128112, 'all': 0.17854506408859483},
        'binG': {'301': 0.023767972968812043, '302': 0.21603721619907898, '303': 0.17821019221348697, 'all': 0.1393384604604593},
        'G': {'301': 0.023767972968812043, '302': 0.21603721619907898, '303': 0.17821019221348697, 'all': 0.1393384604604593},
        'ndcg_rel': {'301': 0.16510462207212098, '302': 0.7130419483171867, '303': 0.22631021213329267, 'all': 0.3681522608408668},
        'Rndcg': {'301': 0.1567410667568363, '302': 0.6195941570501706, '303': 0.19312453617851766, 'all': 0.3231532533285082},
    },
    'aqc': {
        'infAP': {'301': 0.03242535802486353, '302': 0.0, '303': 0.272271527450613, 'all': 0.1015656284918255},
        'binG': {'301': 0.023767972968812043, '302': 0.0, '303': 0.2494356088774568, 'all': 0.09106786061542295},
        'G': {'301': 0.023767972968812043, '302': 0.0, '303': 0.2494356088774568, 'all': 0.09106786061542295},
        'ndcg_rel': {'301': 0.16510462207212098, '302': 0.0, '303': 0.4284541080803444, 'all': 0.1978529100508218},
        'Rndcg': {'301': 0.1567410667568363, '302': 0.0, '303': 0.41815056907401216, 'all': 0.19163054527694948},
    },
    'aqcM': {
        'infAP': {'301': 0.011793205686555498, '302': 0.0, '303': 0.272271527450613, 'all': 0.09468824437905617},
        'binG': {'301': 0.0101596850228634, '302': 0.0, '303': 0.2494356088774568, 'all': 0.08653176463344008},
        'G': {'301': 0.0101596850228634, '302': 0.0, '303': 0.2494356088774568, 'all': 0.08653176463344008},
        'ndcg_rel': {'301': 0.07388517492181121, '302': 0.0, '303': 0.4284541080803444, 'all': 0.16744642766738518},
        'Rndcg': {'301': 0.0670477317642571, '302': 0.0, '303': 0.41815056907401216, 'all': 0.16173276694608976},
    },
    'aql': {
        'infAP': {'301': 0.0002714467969595435, '302': 0.41745404847963985, '303': 0.12002365566482048, 'all': 0.1792497169804733},
        'binG': {'301': 0.01008049898507823, '302': 0.21603721619907898, '303': 0.18391199265294308, 'all': 0.13667656927903343},
        'G': {'301': 0.02129664198037127, '302': 0.16225908292960983, '303': 0.17834183046292562, 'all': 0.12063251845763556},
        'ndcg_rel': {'301': 0.13932347703459633, '302': 0.7130419483171865, '303': 0.21862755686181298, 'all': 0.35699766073786526},
        'Rndcg': {'301': 0.08610037335911455, '302': 0.6195941570501704, '303': 0.18343295530294976, 'all': 0.2963758285707449},
    },
}

RANDOM = {
    '': {
        'infAP': {'q1': 0.41312827185107176, 'q12': 0.0, 'q2': 0.08333374999611114, 'q3': 0.1492596140361504, 'q4': 0.47499846182558414, 'q5': 0.3963502319869488, 'q6': 0.03434373636222627, 'q7': 0.0, 'q8': 0.37445740880949285, 'q9': 0.125, 'all': 0.20508714748675852},
        'binG': {'q1': 0.31395912834982564, 'q12': 0.0, 'q2': 0.1, 'q3': 0.16077636498717948, 'q4': 0.28234658187877654, 'q5': 0.2629241213439691, 'q6': 0.052724812846828284, 'q7': 0.0, 'q8': 0.2801193481055797, 'q9': 0.11538461538461539, 'all': 0.15682349728967743},
        'G': {'q1': 0.24156032638105474, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.11061400312622208, 'q4': 0.14437092126204729, 'q5': 0.2278007287286425, 'q6': 0.07329855813270554, 'q7': 0.0, 'q8': 0.17302322241022686, 'q9': 0.11538461538461539, 'all': 0.11729687447775997},
        'ndcg_rel': {'q1': 0.5657524981448013, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.20205188625519552, 'q4': 0.31966499153671296, 'q5': 0.40107382566008587, 'q6': 0.14522978434296013, 'q7': 0.0, 'q8': 0.35944154576603304, 'q9': 0.3459326909603614, 'all': 0.2543061137420183},
        'Rndcg': {'q1': 0.4757337602499911, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.09250686362547612, 'q4': 0.22463791669310096, 'q5': 0.30440638078717025, 'q6': 0.037849068710438104, 'q7': 0.0, 'q8': 0.31879963137277934, 'q9': 0.26714703602013445, 'all': 0.18817223201500277},
    },
    '-l2': {
        'infAP': {'q1': 0.3968183610178543, 'q12': 0.0, 'q2': 0.08333416666111115, 'q3': 0.05170106316498961, 'q4': 0.08333499996666732, 'q5': 0.32188209049729716, 'q6': 0.03703777777407409, 'q7': 0.0, 'q8': 0.21233152174163306, 'q9': 0.0, 'all': 0.11864399808236267},
        'binG': {'q1': 0.3717228559039946, 'q12': 0.0, 'q2': 0.14355885269113103, 'q3': 0.11220071640605726, 'q4': 0.125, 'q5': 0.28452596170166916, 'q6': 0.10034333188799373, 'q7': 0.0, 'q8': 0.22531882323733554, 'q9': 0.0, 'all': 0.13626705418281815},
        'G': {'q1': 0.24156032638105474, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.11061400312622208, 'q4': 0.14437092126204729, 'q5': 0.2278007287286425, 'q6': 0.07329855813270554, 'q7': 0.0, 'q8': 0.17302322241022686, 'q9': 0.11538461538461539, 'all': 0.11729687447775997},
        'ndcg_rel': {'q1': 0.5657524981448013, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.20205188625519552, 'q4': 0.31966499153671296, 'q5': 0.40107382566008587, 'q6': 0.14522978434296013, 'q7': 0.0, 'q8': 0.35944154576603304, 'q9': 0.3459326909603614, 'all': 0.2543061137420183},
        'Rndcg': {'q1': 0.4757337602499911, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.09250686362547612, 'q4': 0.22463791669310096, 'q5': 0.30440638078717025, 'q6': 0.037849068710438104, 'q7': 0.0, 'q8': 0.31879963137277934, 'q9': 0.0, 'all': 0.16145752841298933},
    },
    '-M5': {
        'infAP': {'q1': 0.181817727281818, 'q12': 0.0, 'q2': 0.08333374999611114, 'q3': 0.0, 'q4': 0.2749989583504163, 'q5': 0.0125, 'q6': 0.0, 'q7': 0.0, 'q8': 0.10606106059696986, 'q9': 0.125, 'all': 0.07837114962253153},
        'binG': {'q1': 0.18181818181818182, 'q12': 0.0, 'q2': 0.1, 'q3': 0.0, 'q4': 0.18927892607143726, 'q5': 0.024178300452158852, 'q6': 0.0, 'q7': 0.0, 'q8': 0.11471450064935591, 'q9': 0.11538461538461539, 'all': 0.07253745243757494},
        'G': {'q1': 0.1433931258116949, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.0, 'q4': 0.1011177072541098, 'q5': 0.027955671147653766, 'q6': 0.0, 'q7': 0.0, 'q8': 0.04813212816532246, 'q9': 0.11538461538461539, 'all': 0.05228996171154813},
        'ndcg_rel': {'q1': 0.4219004678503808, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.0, 'q4': 0.25751807066221727, 'q5': 0.09277402636070281, 'q6': 0.0, 'q7': 0.0, 'q8': 0.1748501954141507, 'q9': 0.3459326909603614, 'all': 0.14968893660018456},
        'Rndcg': {'q1': 0.4184802687266387, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.0, 'q4': 0.1970147072930619, 'q5': 0.06488147702644803, 'q6': 0.0, 'q7': 0.0, 'q8': 0.17531000903133886, 'q9': 0.26714703602013445, 'all': 0.12834751607885592},
    },
    '-c': {
        'infAP': {'q1': 0.41312827185107176, 'q12': 0.0, 'q2': 0.08333374999611114, 'q3': 0.1492596140361504, 'q4': 0.47499846182558414, 'q5': 0.3963502319869488, 'q6': 0.03434373636222627, 'q7': 0.0, 'q8': 0.37445740880949285, 'q9': 0.125, 'all': 0.18644286135159865},
        'binG': {'q1': 0.31395912834982564, 'q12': 0.0, 'q2': 0.1, 'q3': 0.16077636498717948, 'q4': 0.28234658187877654, 'q5': 0.2629241213439691, 'q6': 0.052724812846828284, 'q7': 0.0, 'q8': 0.2801193481055797, 'q9': 0.11538461538461539, 'all': 0.14256681571788857},
        'G': {'q1': 0.24156032638105474, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.11061400312622208, 'q4': 0.14437092126204729, 'q5': 0.2278007287286425, 'q6': 0.07329855813270554, 'q7': 0.0, 'q8': 0.17302322241022686, 'q9': 0.11538461538461539, 'all': 0.10663352225250905},
        'ndcg_rel': {'q1': 0.5657524981448013, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.20205188625519552, 'q4': 0.31966499153671296, 'q5': 0.40107382566008587, 'q6': 0.14522978434296013, 'q7': 0.0, 'q8': 0.35944154576603304, 'q9': 0.3459326909603614, 'all': 0.23118737612910756},
        'Rndcg': {'q1': 0.4757337602499911, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.09250686362547612, 'q4': 0.22463791669310096, 'q5': 0.30440638078717025, 'q6': 0.037849068710438104, 'q7': 0.0, 'q8': 0.31879963137277934, 'q9': 0.26714703602013445, 'all': 0.17106566546818433},
    },
    '-J': {
        'infAP': {'q1': 0.41937172259267785, 'q12': 0.0, 'q2': 0.08333374999611114, 'q3': 0.28888936229759443, 'q4': 0.4999987166826664, 'q5': 0.727895948141262, 'q6': 0.0484851212108485, 'q7': 0.0, 'q8': 0.3787391123810657, 'q9': 0.1282051282051282, 'all': 0.2574918861507354},
        'binG': {'q1': 0.3566326752537851, 'q12': 0.0, 'q2': 0.1, 'q3': 0.2521911537850411, 'q4': 0.5, 'q5': 0.5635001177502548, 'q6': 0.07033687404264394, 'q7': 0.0, 'q8': 0.3064925951519117, 'q9': 0.12545613489011212, 'all': 0.22746095508737488},
        'G': {'q1': 0.2532640620422178, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.14071882494246205, 'q4': 0.18029214483616507, 'q5': 0.4530173407873049, 'q6': 0.08888888888888888, 'q7': 0.0, 'q8': 0.18030764335068766, 'q9': 0.12545613489011212, 'all': 0.15088614090899236},
        'ndcg_rel': {'q1': 0.6021779936068378, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.30638300676059643, 'q4': 0.46682348467340057, 'q5': 0.8366222140211552, 'q6': 0.19481240691461113, 'q7': 0.0, 'q8': 0.3782503205442554, 'q9': 0.36807124694633664, 'all': 0.3357054588221226},
        'Rndcg': {'q1': 0.5420864489645157, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.27684567295505824, 'q4': 0.4321113616698537, 'q5': 0.8109191647925117, 'q6': 0.06356859955535489, 'q7': 0.0, 'q8': 0.3220283014356644, 'q9': 0.28009164738802195, 'all': 0.2888292859451918},
    },
    '-c -J -l2 -M5': {
        'infAP': {'q1': 0.28571357144285686, 'q12': 0.0, 'q2': 0.08333416666111115, 'q3': 0.0, 'q4': 0.1250012499750005, 'q5': 0.1111111111111111, 'q6': 0.0, 'q7': 0.0, 'q8': 0.07142928570000029, 'q9': 0.0, 'all': 0.061508125899098175},
        'binG': {'q1': 0.2857142857142857, 'q12': 0.0, 'q2': 0.14355885269113103, 'q3': 0.0, 'q4': 0.15773243839286438, 'q5': 0.1111111111111111, 'q6': 0.0, 'q7': 0.0, 'q8': 0.09013282193877965, 'q9': 0.0, 'all': 0.07165904634983382},
        'G': {'q1': 0.1433931258116949, 'q12': 0.0, 'q2': 0.08691636935208504, 'q3': 0.0, 'q4': 0.12871177053822622, 'q5': 0.10344827586206896, 'q6': 0.0, 'q7': 0.0, 'q8': 0.04813212816532246, 'q9': 0.12545613489011212, 'all': 0.05782343678359178},
        'ndcg_rel': {'q1': 0.4219004678503808, 'q12': 0.0, 'q2': 0.2039139147540326, 'q3': 0.0, 'q4': 0.3774208395892359, 'q5': 0.2801503926238128, 'q6': 0.0, 'q7': 0.0, 'q8': 0.1748501954141507, 'q9': 0.36807124694633664, 'all': 0.16602791428890454},
        'Rndcg': {'q1': 0.4184802687266387, 'q12': 0.0, 'q2': 0.1606416626909374, 'q3': 0.0, 'q4': 0.3750445979804787, 'q5': 0.29784286843546987, 'q6': 0.0, 'q7': 0.0, 'q8': 0.17531000903133886, 'q9': 0.0, 'all': 0.1297563097149876},
    },
}


def make_files(seed=38):
    """(qrels text, run text) of the random graded run (the files RANDOM was printed from)."""
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(60)]
    qrels, run = [], []
    for q in range(1, 13):
        qid = f"q{q}"
        judged = rng.sample(docs, 24)
        grades = [-2, -1, 0, 0, 0, 1, 1, 2, 3]
        if q == 9:
            grades = [-1, 0, 0, 1]          # nothing at -l2
        if q == 12:
            grades = [-1, 0]                # nothing relevant at all
        if q != 11:                          # q11: results, no judgements (left out)
            qrels += [f"{qid} 0 {d} {rng.choice(grades)}" for d in judged]
        if q == 10:                          # q10: judged, no results (counted by -c alone)
            continue
        n_ideal = sum(1 for line in qrels if line.startswith(qid + " ") and int(line.split()[3]) > 0)
        length = {6: n_ideal + 1, 7: n_ideal, 8: n_ideal + 2}.get(q, rng.randint(3, 30))
        length = max(1, length)
        ranked = rng.sample(judged[:16], min(length, 16)) + rng.sample(docs, 40)
        seen, listed = set(), []
        for d in ranked:
            if d not in seen and len(listed) < length:
                seen.add(d)
                listed.append(d)
        for rank, d in enumerate(listed, start=1):
            score = rng.choice([9, 8, 8, 7, 7, 7, 6, 5, 5, 4, 3, 2.5, 1])
            run.append(f"{qid} Q0 {d} {rank} {score} seed{seed}")
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n"


def ours(qrels, run, flags: str) -> dict:
    """{measure: {qid or 'all': value}} from evalcore.trec, the measures of NEW in their order."""
    got = by_measure(qrels, run, NEW, flags)
    assert list(got) == list(NEW)
    return got


def only_new(want: dict) -> dict:
    return {m: want[m] for m in NEW}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trec38")
    qrels, run = make_files()
    (folder / "qrels").write_text(qrels)
    (folder / "run").write_text(run)
    return folder / "qrels", folder / "run"


# --------------------------------------------------------------------------- trec_eval's own test files


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_trec_eval_s_published_test_outputs(name):
    qrels, run, flags = COMMANDS[name]
    got = ours(str(FIXTURES / qrels), str(FIXTURES / run), flags)
    assert_close(got, only_new(FULL[name]), name)
    for measure in NEW:   # as published: 4 decimals, query by query then all
        printed = [f"{got[measure][q]:6.4f}" for q in [*sorted(q for q in got[measure] if q != "all"), "all"]]
        assert printed == PUBLISHED[name][measure].split(), (name, measure)


def test_full_precision_values_print_as_published():
    """The two sources agree: FULL rounds to PUBLISHED."""
    for name, measures in FULL.items():
        for measure, values in measures.items():
            assert [f"{v:6.4f}" for v in values.values()] == PUBLISHED[name][measure].split()


# --------------------------------------------------------------------------- a random graded run


@pytest.mark.parametrize("flags", sorted(RANDOM))
def test_a_random_graded_run_with_ties_pool_and_unjudged_documents(files, flags):
    got = ours(str(files[0]), str(files[1]), flags)
    assert_close(got, only_new(RANDOM[flags]), flags or "no flags")
    for measure in NEW:   # trec_eval 9.0.8 prints no line for q10 under -c; evalcore does (0, counted in all)
        extra = set(got[measure]) - set(RANDOM[flags][measure])
        assert extra == ({"q10"} if "-c" in flags else set())
        assert all(got[measure][q] == 0 for q in extra)


@pytest.mark.parametrize("flags", sorted(RANDOM))
def test_a_random_graded_run_matches_the_brute_force_references(files, flags):
    got = ours(str(files[0]), str(files[1]), flags)
    level = keywords(flags).get("rel_level", 1)
    rankings = trec_rankings(files[0].read_text(), files[1].read_text(), flags)
    assert set(rankings) == set(got["G"]) - {"all"}
    for measure in NEW:
        for qid, (ranking, judged) in rankings.items():
            want = REFERENCE[measure](ranking, judged, level) or 0.0   # trec_eval's 0 where undefined
            assert got[measure][qid] == pytest.approx(want, rel=1e-12, abs=1e-15), (flags, measure, qid)


def test_rndcg_takes_the_list_end_only_two_places_past_r():
    """Rndcg's points: the R of each grade, and n when n >= R' + 2 (trec_eval's loop has taken place R' + 1 by
    then). Hand-worked: one relevant document at rank 2 of 2 scores 0 (ndcg at R = 1 only); of 3, the mean of
    ndcg@1 = 0 and ndcg@3 = 1/log2(3) (printed by trec_eval 9.0.8 too: 0 and 0.31546487678572877)."""
    qrels = {"a": {"d1": 1, "d2": 0, "d3": 0}, "b": {"d1": 1, "d2": 0, "d3": 0}}
    run = {"a": {"d2": 3, "d1": 2}, "b": {"d2": 3, "d1": 2, "d3": 1}}
    result = evalcore.trec(qrels, run, ["Rndcg"])
    assert result.per_query["a"]["Rndcg"] == 0.0
    assert result.per_query["b"]["Rndcg"] == pytest.approx(1 / math.log2(3) / 2, rel=1e-15)


# --------------------------------------------------------------------------- every way in


def test_evalcore_trec_prints_them_as_trec_eval_does(files):
    done = subprocess.run([*CLI, "trec", "-q", *sum((["-m", m] for m in NEW), []), str(files[0]), str(files[1])],
                          capture_output=True, text=True, timeout=240, env={**os.environ, "EVALCORE_DEBUG": ""})
    assert done.returncode == 0, done.stderr
    want = RANDOM[""]
    lines = done.stdout.splitlines()
    expected = [f"{m:<22}\t{q}\t{want[m][q]:6.4f}" for q in [q for q in want["G"] if q != "all"] for m in NEW]
    assert lines == expected + [f"{m:<22}\tall\t{want[m]['all']:6.4f}" for m in NEW]


def test_all_trec_has_them_in_trec_eval_s_order():
    """trec_eval's -m all_trec prints ... recall infAP gm_bpref Rprec_mult utility 11pt_avg binG G ndcg ndcg_rel
    Rndcg ndcg_cut ... (test/out.test.a); evalcore keeps that order for the measures it computes."""
    trec_eval_order = ("runid num_q num_ret num_rel num_rel_ret map gm_map Rprec bpref recip_rank iprec_at_recall "
                       "P recall infAP gm_bpref Rprec_mult utility 11pt_avg binG G ndcg ndcg_rel Rndcg ndcg_cut "
                       "map_cut relative_P success set_P set_relative_P set_recall set_map set_F "
                       "num_nonrel_judged_ret rbp rbp_resid unj").split()
    chosen = list(trec_api.parse_measures(["all_trec"]))
    assert set(NEW) <= set(chosen)
    assert chosen == [m for m in trec_eval_order if m in chosen]
    for measure in NEW:
        assert measure not in trec_api.NOT_COMPUTED


def test_pytrec_eval_s_relevance_evaluator_computes_them(files):
    qrels = pytrec_eval.parse_qrel(files[0].read_text().splitlines())
    run = pytrec_eval.parse_run(files[1].read_text().splitlines())
    assert set(NEW) <= pytrec_eval.supported_measures and set(NEW) <= pytrec_eval.supported_nicknames["all_trec"]
    got = pytrec_eval.RelevanceEvaluator(qrels, set(NEW)).evaluate(run)
    want = RANDOM[""]
    assert set(got) == set(want["G"]) - {"all"}
    for measure in NEW:
        for qid, value in got.items():
            assert value[measure] == pytest.approx(want[measure][qid], rel=1e-12, abs=1e-15), (measure, qid)


@pytest.mark.parametrize("given, name", [("infAP", "infap"), ("binG", "bing"), ("G", "g"), ("ndcg_rel", "ndcg_rel"),
                                         ("Rndcg", "rndcg")])
def test_metrics_takes_trec_eval_s_names(given, name):
    assert registry.select([given]) == (name,)


# --------------------------------------------------------------------------- RBP at any persistence


@pytest.mark.parametrize("given, name", [("RBP(p=0.73)", "rbp_0.73"), ("rbp(p=0.735)", "rbp_0.735"),
                                         ("rbp_resid(p=0.6)", "rbp_resid_0.60"), ("RBP(p=0.9)", "rbp"),
                                         ("rbp(p=0.90)", "rbp"), ("RBP(p=0.8)", "rbp_0.80"), ("rbp_0.73", "rbp_0.73"),
                                         ("RBP_RESID(p=.25)", "rbp_resid_0.25")])
def test_rbp_takes_any_persistence_and_names_it_once(given, name):
    assert registry.select([given]) == (name,)
    column = registry.Column(registry.parse(given)[0])
    assert column.name == column.summary == name and registry.lookup(name) == column
    assert registry.direction(name) == ("lower" if "resid" in name else "higher")
    assert registry.parse(name) == (column.metric, None)
    if name in registry._MADE:   # made here: a worker process that unpickles it has the same metric
        assert pickle.loads(pickle.dumps(column)) == column


@pytest.mark.parametrize("given, words", [("rbp(p=1.5)", "the persistence p must be a number between 0 and 1"),
                                          ("rbp(p=0)", "between 0 and 1"), ("rbp(p=x)", "between 0 and 1"),
                                          ("rbp(p=0.7)@5", "rbp takes no cut-off"), ("rbp_0.730", "unknown metric")])
def test_a_bad_persistence_is_an_option_error(given, words):
    with pytest.raises(evalcore.OptionError, match=words) as info:
        registry.parse(given)
    assert info.value.option == "--metrics"


def test_rbp_at_a_persistence_of_its_own_matches_the_reference_end_to_end():
    from conftest import random_reid
    from reference import cosine_scores, relevance_reid

    data = random_reid(np.random.default_rng(38), n_query=60, n_gallery=400, dims=8, n_ids=20)
    result = evalcore.evaluate(query=data["query/emb"], gallery=data["gallery/emb"],
                               query_labels=data["query/label"], gallery_labels=data["gallery/label"],
                               query_cams=data["query/cam"], gallery_cams=data["gallery/cam"],
                               gallery_junk=data["gallery/junk"], protocol="reid",
                               metrics=["RBP(p=0.73)", "rbp_resid(p=0.6)", "map"])
    names = result.per_query.column_names
    assert names[names.index("ap"):names.index("ap") + 3] == ["ap", "rbp_0.73", "rbp_resid_0.60"]
    assert {"rbp_0.73", "rbp_resid_0.60"} <= set(result.summary.column_names)
    rel, junk = relevance_reid(data["query/label"], data["query/cam"], data["gallery/label"], data["gallery/cam"],
                               data["gallery/junk"])
    scores = cosine_scores(data["query/emb"], data["gallery/emb"]).astype(np.float32)
    for i, row in enumerate(result.per_query.to_pylist()):
        keep = np.flatnonzero(~junk[i])
        relevant = rel[i, keep[np.lexsort((keep, rel[i, keep], -scores[i, keep]))]]
        want = references.rbp(relevant, int(rel[i].sum()), p=0.73)
        assert row["rbp_0.73"] == (None if want is None else pytest.approx(want, rel=1e-12, abs=1e-15))
        assert row["rbp_resid_0.60"] == pytest.approx(references.rbp_resid(relevant, 0, p=0.6), rel=1e-12)


# --------------------------------------------------------------------------- DCG, not normalised


def test_dcg_is_the_graded_sum_of_discounted_gains(files, tmp_path):
    from evalcore.engine.evaluate import Options, evaluate
    from evalcore.io import importers

    out = tmp_path / "ds.zarr"
    importers.import_to("trec-run", [files[1]], out, qrels=str(files[0]), order="trec_eval")
    result = evaluate(out, Options(protocol="qrels", ks=(5,), metrics=("dcg", "dcg@5", "ndcg"), empty_queries="zero"))
    rankings = trec_rankings(files[0].read_text(), files[1].read_text(), "")
    rows = {row["key"]: row for row in result.per_query.to_pylist()}
    assert set(rows) == set(rankings)
    for qid, (ranking, judged) in rankings.items():
        gains = [g if g is not None and g > 0 else 0 for g in ranking]
        whole = sum(g / math.log2(j + 2) for j, g in enumerate(gains))
        ideal = sorted((g for g in judged if g > 0), reverse=True)
        assert rows[qid]["dcg"] == pytest.approx(whole, rel=1e-12, abs=1e-15)
        assert rows[qid]["dcg_at_5"] == pytest.approx(sum(g / math.log2(j + 2) for j, g in enumerate(gains[:5])),
                                                      rel=1e-12, abs=1e-15)
        if ideal:   # and nDCG is it over the ideal's
            assert rows[qid]["ndcg"] == pytest.approx(whole / sum(g / math.log2(j + 2) for j, g in enumerate(ideal)),
                                                      rel=1e-12)


def test_a_scan_of_the_whole_gallery_under_qrels_refuses_infap_naming_it():
    rng = np.random.default_rng(38)
    query, gallery = (rng.normal(size=(n, 4)).astype(np.float32) for n in (5, 30))
    with pytest.raises(evalcore.OptionError, match=r"^metrics: bpref, infap need\(s\) to know the judged non-relevant"):
        evalcore.evaluate(query=query, gallery=gallery, query_ids=[f"q{i}" for i in range(5)],
                          gallery_ids=[f"d{i}" for i in range(30)], qrels={"q0": {"d3": 1, "d4": 0}, "q1": {"d5": 2}},
                          protocol="qrels", metrics=["bpref", "infap", "map"])
