"""trec_eval's measures of the relevant ranks alone, as registered metrics (issue 38, CONTRACT §18, part 1).

``num_rel``, ``num_rel_ret``, ``gm_map``, ``gm_bpref``, ``iprec_at_recall_0.00`` .. ``_1.00``, ``11pt_avg``,
``Rprec_mult_0.20`` .. ``_2.00``, ``relative_P_k``, and the set measures ``num_ret``, ``set_P``, ``set_recall``,
``set_F``, ``set_map``, ``set_relative_P``, ``utility``, ``num_nonrel_judged_ret``, ``rbp`` and ``rbp_resid``
(precomputed rankings: the run's lists) under trec_eval's names (lower-cased: ``rprec_mult_0.20``,
``relative_p@5``), through import trec-run and evaluate, equal trec_eval's own printout per query and ``all``.

Expected values: printed by trec_eval 10.0-rc3 (usnistgov/trec_eval, built with ``make`` after changing its
print files' "%6.4f" to "%.17g", in /tmp only), run as ``trec_eval -q [FLAGS]
-m num_rel -m num_rel_ret -m gm_map -m gm_bpref -m iprec_at_recall -m 11pt_avg -m Rprec_mult
-m relative_P.1,3,5,10 -m num_ret -m set_P -m set_recall -m set_F -m set_map -m set_relative_P -m utility
-m num_nonrel_judged_ret -m rbp -m rbp_resid QRELS RUN`` and ``trec_eval -q [FLAGS] -m rbp.p=0.8
-m rbp_resid.p=0.8 QRELS RUN`` (trec_eval computes a measure once: p = 0.8 is a second run); its printed values copied as they stand. QRELS and RUN were drawn once
(random.Random(38)): grades -2..3, tied scores (trec_eval breaks ties by docno, descending: ``--order
trec_eval``), unjudged documents in the runs; q7 has no relevant document, q8 grade 1 at most (none at -l2),
q9 is judged with no results (counted by -c alone). Without -c, trec_eval 10.0-rc3 stops at a judged query
without results ("result qid 'q9' not found in qrels", exit 4) where trec_eval 9 skips it: those runs were
given QRELS without q9's lines, which is what trec_eval 9 and evalcore evaluate. trec_eval 10 turns a recall
level into a count of relevant items by rounding (lround(x R)); trec_eval 9 by (long)(x R + 0.9), which differs
here (q1's iprec_at_recall_0.20: 1 in 10.0, 0.6 in 9.0.7); evalcore follows 10.
"""
import math

import pytest

from evalcore.core import registry
from evalcore.engine.evaluate import Options, evaluate
from evalcore.io import importers

QRELS = """\
q1 0 d01 -2
q1 0 d05 0
q1 0 d07 1
q1 0 d10 1
q1 0 d11 1
q1 0 d12 1
q1 0 d13 1
q1 0 d14 3
q2 0 d02 1
q2 0 d04 -1
q2 0 d06 0
q2 0 d10 0
q2 0 d11 1
q2 0 d12 -2
q3 0 d03 0
q3 0 d06 3
q4 0 d00 0
q4 0 d02 2
q4 0 d04 -2
q4 0 d06 -1
q4 0 d07 -1
q4 0 d09 3
q5 0 d00 1
q5 0 d03 -1
q5 0 d04 0
q5 0 d08 -1
q6 0 d00 1
q6 0 d01 1
q6 0 d02 1
q6 0 d03 2
q6 0 d04 -1
q6 0 d05 2
q6 0 d06 2
q6 0 d07 3
q7 0 d02 -1
q7 0 d03 0
q7 0 d04 -1
q7 0 d06 0
q8 0 d00 0
q8 0 d02 0
q8 0 d03 1
q9 0 d01 -2
q9 0 d02 3
q9 0 d04 -2
q9 0 d06 3
q9 0 d12 1
"""
RUN = """\
q1 Q0 d01 1 0.9 r
q1 Q0 d10 2 0.9 r
q1 Q0 d05 3 0.5 r
q1 Q0 d07 4 0.5 r
q1 Q0 d14 5 0.5 r
q1 Q0 d15 6 0.5 r
q1 Q0 d00 7 0.3 r
q1 Q0 d03 8 0.3 r
q1 Q0 d11 9 0.3 r
q1 Q0 d08 10 0.2 r
q1 Q0 d13 11 0.2 r
q1 Q0 d02 12 0.1 r
q1 Q0 d06 13 0.1 r
q1 Q0 d09 14 0.1 r
q1 Q0 d12 15 0.1 r
q2 Q0 d05 1 0.9 r
q2 Q0 d06 2 0.9 r
q2 Q0 d01 3 0.8 r
q2 Q0 d03 4 0.8 r
q2 Q0 d00 5 0.3 r
q3 Q0 d00 1 0.9 r
q3 Q0 d03 2 0.9 r
q3 Q0 d08 3 0.9 r
q3 Q0 d09 4 0.9 r
q3 Q0 d13 5 0.9 r
q3 Q0 d06 6 0.8 r
q3 Q0 d14 7 0.5 r
q3 Q0 d02 8 0.3 r
q3 Q0 d12 9 0.3 r
q3 Q0 d11 10 0.2 r
q3 Q0 d01 11 0.1 r
q3 Q0 d07 12 0.1 r
q3 Q0 d10 13 0.1 r
q4 Q0 d02 1 0.9 r
q4 Q0 d09 2 0.9 r
q4 Q0 d05 3 0.8 r
q4 Q0 d06 4 0.8 r
q4 Q0 d08 5 0.8 r
q4 Q0 d00 6 0.5 r
q4 Q0 d01 7 0.3 r
q4 Q0 d04 8 0.2 r
q4 Q0 d03 9 0.1 r
q5 Q0 d06 1 0.9 r
q5 Q0 d04 2 0.8 r
q5 Q0 d03 3 0.3 r
q5 Q0 d05 4 0.3 r
q5 Q0 d00 5 0.2 r
q5 Q0 d07 6 0.2 r
q5 Q0 d09 7 0.2 r
q5 Q0 d02 8 0.1 r
q6 Q0 d00 1 0.9 r
q6 Q0 d07 2 0.9 r
q6 Q0 d03 3 0.5 r
q6 Q0 d01 4 0.3 r
q6 Q0 d04 5 0.3 r
q6 Q0 d06 6 0.3 r
q6 Q0 d02 7 0.2 r
q6 Q0 d05 8 0.1 r
q7 Q0 d04 1 0.9 r
q7 Q0 d00 2 0.3 r
q7 Q0 d01 3 0.3 r
q8 Q0 d01 1 0.9 r
q8 Q0 d04 2 0.5 r
q8 Q0 d00 3 0.3 r
q8 Q0 d03 4 0.2 r
"""

TREC_EVAL = {
    "": """
num_ret q1=15 q2=5 q3=13 q4=9 q5=8 q6=8 q7=3 q8=4 all=65
num_rel q1=6 q2=2 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 all=20
num_rel_ret q1=6 q2=0 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 all=18
iprec_at_recall_0.00 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.44494047619047622
iprec_at_recall_0.10 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.44494047619047622
iprec_at_recall_0.20 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.44494047619047622
iprec_at_recall_0.30 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.39494047619047618
iprec_at_recall_0.40 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.39494047619047618
iprec_at_recall_0.50 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.39494047619047618
iprec_at_recall_0.60 q1=0.5714285714285714 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 all=0.39136904761904762
iprec_at_recall_0.70 q1=0.5714285714285714 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 all=0.37574404761904762
iprec_at_recall_0.80 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 all=0.36681547619047616
iprec_at_recall_0.90 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 all=0.36681547619047616
iprec_at_recall_1.00 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 all=0.36681547619047616
Rprec_mult_0.20 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.3125
Rprec_mult_0.40 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.29166666666666663
Rprec_mult_0.60 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=0 all=0.28749999999999998
Rprec_mult_0.80 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.83333333333333337 q7=0 q8=0 all=0.3041666666666667
Rprec_mult_1.00 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.8571428571428571 q7=0 q8=0 all=0.29464285714285715
Rprec_mult_1.20 q1=0.5 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.77777777777777779 q7=0 q8=0 all=0.24305555555555552
Rprec_mult_1.40 q1=0.44444444444444442 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.69999999999999996 q7=0 q8=0 all=0.22638888888888889
Rprec_mult_1.60 q1=0.5 q2=0 q3=0 q4=0.5 q5=0 q6=0.58333333333333337 q7=0 q8=0 all=0.19791666666666669
Rprec_mult_1.80 q1=0.45454545454545453 q2=0 q3=0 q4=0.5 q5=0 q6=0.53846153846153844 q7=0 q8=0 all=0.18662587412587411
Rprec_mult_2.00 q1=0.5 q2=0 q3=0 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 all=0.1875
utility q1=-3 q2=-5 q3=-11 q4=-5 q5=-6 q6=6 q7=-3 q8=-2 all=-3.625
11pt_avg q1=0.67662337662337657 q2=0 q3=0.16666666666666669 q4=1 q5=0.14285714285714282 q6=0.95454545454545459 q7=0 q8=0.25 all=0.39883658008658007
relative_P_1 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.375
relative_P_3 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.29166666666666663
relative_P_5 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=1 all=0.42500000000000004
relative_P_10 q1=0.83333333333333337 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.72916666666666674
set_P q1=0.40000000000000002 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0.125 q6=0.875 q7=0 q8=0.25 all=0.24364316239316239
set_relative_P q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
set_recall q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
set_map q1=0.40000000000000002 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0.125 q6=0.875 q7=0 q8=0.25 all=0.24364316239316239
set_F q1=0.57142857142857151 q2=0 q3=0.14285714285714288 q4=0.36363636363636359 q5=0.22222222222222221 q6=0.93333333333333335 q7=0 q8=0.40000000000000002 all=0.32918470418470419
num_nonrel_judged_ret q1=1 q2=1 q3=1 q4=1 q5=1 q6=0 q7=0 q8=1 all=6
rbp q1=0.1691924028363333 q2=0 q3=0.059049000000000004 q4=0.15999999999999998 q5=0.053144100000000007 q6=0.30188415999999996 q7=0 q8=0.072899999999999993 all=0.10202120785454166
rbp_resid q1=0.57917379149100001 q2=0.90000000000000013 q3=0.86805100000000013 q4=0.75095100000000015 q5=0.8568559 q6=0.49607721000000016 q7=1 q8=0.84610000000000007 all=0.78715111268637505
gm_map all=0.027649854019374039
gm_bpref all=0.0006876560219336317
rbp_p=0.8 q1=0.22852407159466667 q2=0 q3=0.065536000000000011 q4=0.30666666666666659 q5=0.052428800000000012 q6=0.47421696000000002 q7=0 q8=0.1024 all=0.15372156228266667
rbp_resid_p=0.8 q1=0.45369178521600012 q2=0.80000000000000016 q3=0.83206400000000014 q4=0.57446400000000009 q5=0.78757120000000003 q6=0.24969216000000011 q7=1 q8=0.76960000000000006 all=0.68338539315199998
""",
    "-l2": """
num_ret q1=15 q2=5 q3=13 q4=9 q5=8 q6=8 q7=3 q8=4 all=65
num_rel q1=1 q2=0 q3=1 q4=2 q5=0 q6=4 q7=0 q8=0 all=8
num_rel_ret q1=1 q2=0 q3=1 q4=2 q5=0 q6=4 q7=0 q8=0 all=8
iprec_at_recall_0.00 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.30208333333333331
iprec_at_recall_0.10 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.30208333333333331
iprec_at_recall_0.20 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.30208333333333331
iprec_at_recall_0.30 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.30208333333333331
iprec_at_recall_0.40 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.27083333333333331
iprec_at_recall_0.50 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.27083333333333331
iprec_at_recall_0.60 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.27083333333333331
iprec_at_recall_0.70 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.27083333333333331
iprec_at_recall_0.80 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.27083333333333331
iprec_at_recall_0.90 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.5 q7=0 q8=0 all=0.23958333333333331
iprec_at_recall_1.00 q1=0.25 q2=0 q3=0.16666666666666666 q4=1 q5=0 q6=0.5 q7=0 q8=0 all=0.23958333333333331
Rprec_mult_0.20 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.25
Rprec_mult_0.40 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 all=0.1875
Rprec_mult_0.60 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.20833333333333331
Rprec_mult_0.80 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.21875
Rprec_mult_1.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.21875
Rprec_mult_1.20 q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.59999999999999998 q7=0 q8=0 all=0.15833333333333333
Rprec_mult_1.40 q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.5 q7=0 q8=0 all=0.14583333333333331
Rprec_mult_1.60 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.42857142857142855 q7=0 q8=0 all=0.11607142857142858
Rprec_mult_1.80 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 all=0.125
Rprec_mult_2.00 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 all=0.125
utility q1=-13 q2=-5 q3=-11 q4=-5 q5=-8 q6=0 q7=-3 q8=-4 all=-6.125
11pt_avg q1=0.25 q2=0 q3=0.16666666666666669 q4=1 q5=0 q6=0.79545454545454541 q7=0 q8=0 all=0.27651515151515149
relative_P_1 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.25
relative_P_3 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.20833333333333331
relative_P_5 q1=1 q2=0 q3=0 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.34375
relative_P_10 q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_P q1=0.066666666666666666 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0 q6=0.5 q7=0 q8=0 all=0.10822649572649573
set_relative_P q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_recall q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_map q1=0.066666666666666666 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0 q6=0.5 q7=0 q8=0 all=0.10822649572649573
set_F q1=0.125 q2=0 q3=0.14285714285714288 q4=0.36363636363636359 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.16227002164502163
num_nonrel_judged_ret q1=6 q2=1 q3=1 q4=1 q5=2 q6=3 q7=0 q8=2 all=16
rbp q1=0.1691924028363333 q2=0 q3=0.059049000000000004 q4=0.15999999999999998 q5=0.053144100000000007 q6=0.30188415999999996 q7=0 q8=0.072899999999999993 all=0.10202120785454166
rbp_resid q1=0.57917379149100001 q2=0.90000000000000013 q3=0.86805100000000013 q4=0.75095100000000015 q5=0.8568559 q6=0.49607721000000016 q7=1 q8=0.84610000000000007 all=0.78715111268637505
gm_map all=0.0020432755849441411
gm_bpref all=0.00016624155755874765
rbp_p=0.8 q1=0.22852407159466667 q2=0 q3=0.065536000000000011 q4=0.30666666666666659 q5=0.052428800000000012 q6=0.47421696000000002 q7=0 q8=0.1024 all=0.15372156228266667
rbp_resid_p=0.8 q1=0.45369178521600012 q2=0.80000000000000016 q3=0.83206400000000014 q4=0.57446400000000009 q5=0.78757120000000003 q6=0.24969216000000011 q7=1 q8=0.76960000000000006 all=0.68338539315199998
""",
    "-M5": """
num_ret q1=5 q2=5 q3=5 q4=5 q5=5 q6=5 q7=3 q8=4 all=37
num_rel q1=6 q2=2 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 all=20
num_rel_ret q1=3 q2=0 q3=0 q4=2 q5=0 q6=4 q7=0 q8=1 all=10
iprec_at_recall_0.00 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.40625
iprec_at_recall_0.10 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.40625
iprec_at_recall_0.20 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.40625
iprec_at_recall_0.30 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.35625000000000001
iprec_at_recall_0.40 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.35625000000000001
iprec_at_recall_0.50 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.35625000000000001
iprec_at_recall_0.60 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0.25 all=0.28125
iprec_at_recall_0.70 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0.25 all=0.15625
iprec_at_recall_0.80 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0.25 all=0.15625
iprec_at_recall_0.90 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0.25 all=0.15625
iprec_at_recall_1.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0.25 all=0.15625
Rprec_mult_0.20 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.3125
Rprec_mult_0.40 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.29166666666666663
Rprec_mult_0.60 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=0 all=0.28749999999999998
Rprec_mult_0.80 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.28333333333333333
Rprec_mult_1.00 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.5714285714285714 q7=0 q8=0 all=0.2589285714285714
Rprec_mult_1.20 q1=0.375 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.44444444444444442 q7=0 q8=0 all=0.18576388888888887
Rprec_mult_1.40 q1=0.33333333333333331 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.40000000000000002 q7=0 q8=0 all=0.17499999999999999
Rprec_mult_1.60 q1=0.29999999999999999 q2=0 q3=0 q4=0.5 q5=0 q6=0.33333333333333331 q7=0 q8=0 all=0.14166666666666666
Rprec_mult_1.80 q1=0.27272727272727271 q2=0 q3=0 q4=0.5 q5=0 q6=0.30769230769230771 q7=0 q8=0 all=0.13505244755244755
Rprec_mult_2.00 q1=0.25 q2=0 q3=0 q4=0.5 q5=0 q6=0.2857142857142857 q7=0 q8=0 all=0.1294642857142857
utility q1=1 q2=-5 q3=-5 q4=-1 q5=-5 q6=3 q7=-3 q8=-2 all=-2.125
11pt_avg q1=0.43636363636363634 q2=0 q3=0 q4=1 q5=0 q6=0.63636363636363635 q7=0 q8=0.25 all=0.29034090909090909
relative_P_1 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.375
relative_P_3 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.29166666666666663
relative_P_5 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=1 all=0.42500000000000004
relative_P_10 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.5714285714285714 q7=0 q8=1 all=0.3839285714285714
set_P q1=0.59999999999999998 q2=0 q3=0 q4=0.40000000000000002 q5=0 q6=0.80000000000000004 q7=0 q8=0.25 all=0.25624999999999998
set_relative_P q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=1 all=0.42500000000000004
set_recall q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.5714285714285714 q7=0 q8=1 all=0.3839285714285714
set_map q1=0.29999999999999999 q2=0 q3=0 q4=0.40000000000000002 q5=0 q6=0.45714285714285713 q7=0 q8=0.25 all=0.17589285714285713
set_F q1=0.54545454545454541 q2=0 q3=0 q4=0.57142857142857151 q5=0 q6=0.66666666666666663 q7=0 q8=0.40000000000000002 all=0.27294372294372293
num_nonrel_judged_ret q1=0 q2=1 q3=1 q4=0 q5=1 q6=0 q7=0 q8=1 all=4
rbp q1=0.12810333333333332 q2=0 q3=0 q4=0.15999999999999998 q5=0 q6=0.23259999999999995 q7=0 q8=0.072899999999999993 all=0.074200416666666644
rbp_resid q1=0.76149000000000011 q2=0.90000000000000013 q3=0.92710000000000015 q4=0.81000000000000016 q5=0.91000000000000014 q6=0.65610000000000013 q7=1 q8=0.84610000000000007 all=0.8513487500000001
gm_map all=0.0021745592760409817
gm_bpref all=0.00064119701878636291
rbp_p=0.8 q1=0.19637333333333334 q2=0 q3=0 q4=0.30666666666666659 q5=0 q6=0.40693333333333326 q7=0 q8=0.1024 all=0.12654666666666664
rbp_resid_p=0.8 q1=0.61568000000000012 q2=0.80000000000000016 q3=0.89760000000000018 q4=0.64000000000000012 q5=0.84000000000000008 q6=0.40960000000000013 q7=1 q8=0.76960000000000006 all=0.74656000000000011
""",
    "-c": """
num_ret q1=15 q2=5 q3=13 q4=9 q5=8 q6=8 q7=3 q8=4 q9=0 all=65
num_rel q1=6 q2=2 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 q9=3 all=23
num_rel_ret q1=6 q2=0 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 q9=0 all=18
iprec_at_recall_0.00 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.39550264550264552
iprec_at_recall_0.10 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.39550264550264552
iprec_at_recall_0.20 q1=1 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.39550264550264552
iprec_at_recall_0.30 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.35105820105820107
iprec_at_recall_0.40 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.35105820105820107
iprec_at_recall_0.50 q1=0.59999999999999998 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.35105820105820107
iprec_at_recall_0.60 q1=0.5714285714285714 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=1 q7=0 q8=0.25 q9=0 all=0.34788359788359791
iprec_at_recall_0.70 q1=0.5714285714285714 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 q9=0 all=0.33399470899470901
iprec_at_recall_0.80 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 q9=0 all=0.32605820105820105
iprec_at_recall_0.90 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 q9=0 all=0.32605820105820105
iprec_at_recall_1.00 q1=0.5 q2=0 q3=0.16666666666666666 q4=1 q5=0.14285714285714285 q6=0.875 q7=0 q8=0.25 q9=0 all=0.32605820105820105
Rprec_mult_0.20 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.27777777777777779
Rprec_mult_0.40 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.25925925925925924
Rprec_mult_0.60 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=0 q9=0 all=0.25555555555555554
Rprec_mult_0.80 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.83333333333333337 q7=0 q8=0 q9=0 all=0.27037037037037037
Rprec_mult_1.00 q1=0.5 q2=0 q3=0 q4=1 q5=0 q6=0.8571428571428571 q7=0 q8=0 q9=0 all=0.26190476190476192
Rprec_mult_1.20 q1=0.5 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.77777777777777779 q7=0 q8=0 q9=0 all=0.21604938271604934
Rprec_mult_1.40 q1=0.44444444444444442 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.69999999999999996 q7=0 q8=0 q9=0 all=0.20123456790123456
Rprec_mult_1.60 q1=0.5 q2=0 q3=0 q4=0.5 q5=0 q6=0.58333333333333337 q7=0 q8=0 q9=0 all=0.17592592592592593
Rprec_mult_1.80 q1=0.45454545454545453 q2=0 q3=0 q4=0.5 q5=0 q6=0.53846153846153844 q7=0 q8=0 q9=0 all=0.16588966588966589
Rprec_mult_2.00 q1=0.5 q2=0 q3=0 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
utility q1=-3 q2=-5 q3=-11 q4=-5 q5=-6 q6=6 q7=-3 q8=-2 q9=0 all=-3.2222222222222223
11pt_avg q1=0.67662337662337657 q2=0 q3=0.16666666666666669 q4=1 q5=0.14285714285714282 q6=0.95454545454545459 q7=0 q8=0.25 q9=0 all=0.35452140452140452
relative_P_1 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.33333333333333331
relative_P_3 q1=0.33333333333333331 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.25925925925925924
relative_P_5 q1=0.59999999999999998 q2=0 q3=0 q4=1 q5=0 q6=0.80000000000000004 q7=0 q8=1 q9=0 all=0.37777777777777782
relative_P_10 q1=0.83333333333333337 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 q9=0 all=0.64814814814814825
set_P q1=0.40000000000000002 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0.125 q6=0.875 q7=0 q8=0.25 q9=0 all=0.21657169990503322
set_relative_P q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 q9=0 all=0.66666666666666663
set_recall q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 q9=0 all=0.66666666666666663
set_map q1=0.40000000000000002 q2=0 q3=0.076923076923076927 q4=0.22222222222222221 q5=0.125 q6=0.875 q7=0 q8=0.25 q9=0 all=0.21657169990503322
set_F q1=0.57142857142857151 q2=0 q3=0.14285714285714288 q4=0.36363636363636359 q5=0.22222222222222221 q6=0.93333333333333335 q7=0 q8=0.40000000000000002 q9=0 all=0.2926086259419593
num_nonrel_judged_ret q1=1 q2=1 q3=1 q4=1 q5=1 q6=0 q7=0 q8=1 q9=0 all=6
rbp q1=0.1691924028363333 q2=0 q3=0.059049000000000004 q4=0.15999999999999998 q5=0.053144100000000007 q6=0.30188415999999996 q7=0 q8=0.072899999999999993 q9=0 all=0.090685518092925924
rbp_resid q1=0.57917379149100001 q2=0.90000000000000013 q3=0.86805100000000013 q4=0.75095100000000015 q5=0.8568559 q6=0.49607721000000016 q7=1 q8=0.84610000000000007 q9=0 all=0.6996898779434445
gm_map all=0.011462583883766805
gm_bpref all=0.00042975297258771315
rbp_p=0.8 q1=0.22852407159466667 q2=0 q3=0.065536000000000011 q4=0.30666666666666659 q5=0.052428800000000012 q6=0.47421696000000002 q7=0 q8=0.1024 q9=0 all=0.13664138869570372
rbp_resid_p=0.8 q1=0.45369178521600012 q2=0.80000000000000016 q3=0.83206400000000014 q4=0.57446400000000009 q5=0.78757120000000003 q6=0.24969216000000011 q7=1 q8=0.76960000000000006 q9=1 all=0.71856479391288886
""",
    "-J": """
num_ret q1=7 q2=1 q3=2 q4=3 q5=2 q6=7 q7=0 q8=2 all=24
num_rel q1=6 q2=2 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 all=20
num_rel_ret q1=6 q2=0 q3=1 q4=2 q5=1 q6=7 q7=0 q8=1 all=18
iprec_at_recall_0.00 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.10 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.20 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.30 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.40 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.50 q1=1 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.60 q1=0.8571428571428571 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.70 q1=0.8571428571428571 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.80 q1=0.8571428571428571 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_0.90 q1=0.8571428571428571 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
iprec_at_recall_1.00 q1=0.8571428571428571 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
Rprec_mult_0.20 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.375
Rprec_mult_0.40 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.375
Rprec_mult_0.60 q1=0.75 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.34375
Rprec_mult_0.80 q1=0.80000000000000004 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.34999999999999998
Rprec_mult_1.00 q1=0.83333333333333337 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.35416666666666669
Rprec_mult_1.20 q1=0.75 q2=0 q3=0.5 q4=0.66666666666666663 q5=0.5 q6=0.77777777777777779 q7=0 q8=0.5 all=0.46180555555555552
Rprec_mult_1.40 q1=0.66666666666666663 q2=0 q3=0.5 q4=0.66666666666666663 q5=0.5 q6=0.69999999999999996 q7=0 q8=0.5 all=0.44166666666666665
Rprec_mult_1.60 q1=0.59999999999999998 q2=0 q3=0.5 q4=0.5 q5=0.5 q6=0.58333333333333337 q7=0 q8=0.5 all=0.3979166666666667
Rprec_mult_1.80 q1=0.54545454545454541 q2=0 q3=0.5 q4=0.5 q5=0.5 q6=0.53846153846153844 q7=0 q8=0.5 all=0.38548951048951047
Rprec_mult_2.00 q1=0.5 q2=0 q3=0.5 q4=0.5 q5=0.5 q6=0.5 q7=0 q8=0.5 all=0.375
utility q1=5 q2=-1 q3=0 q4=1 q5=0 q6=7 q7=0 q8=0 all=1.5
11pt_avg q1=0.93506493506493493 q2=0 q3=0.5 q4=1 q5=0.5 q6=1 q7=-nan q8=0.5 all=-nan
relative_P_1 q1=1 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.375
relative_P_3 q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
relative_P_5 q1=0.80000000000000004 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.72499999999999998
relative_P_10 q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
set_P q1=0.8571428571428571 q2=0 q3=0.5 q4=0.66666666666666663 q5=0.5 q6=1 q7=0 q8=0.5 all=0.50297619047619047
set_relative_P q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
set_recall q1=1 q2=0 q3=1 q4=1 q5=1 q6=1 q7=0 q8=1 all=0.75
set_map q1=0.8571428571428571 q2=0 q3=0.5 q4=0.66666666666666663 q5=0.5 q6=1 q7=0 q8=0.5 all=0.50297619047619047
set_F q1=0.92307692307692302 q2=0 q3=0.66666666666666663 q4=0.80000000000000004 q5=0.66666666666666663 q6=1 q7=0 q8=0.66666666666666663 all=0.5903846153846154
num_nonrel_judged_ret q1=1 q2=1 q3=1 q4=1 q5=1 q6=0 q7=0 q8=1 all=6
rbp q1=0.2096010333333333 q2=0 q3=0.089999999999999983 q4=0.15999999999999998 q5=0.089999999999999983 q6=0.30958239999999998 q7=0 q8=0.089999999999999983 all=0.11864792916666665
rbp_resid q1=0 q2=0 q3=0 q4=0 q5=0 q6=0 q7=0 q8=0 all=0
gm_map all=0.042884079939111801
gm_bpref all=0.0006876560219336317
rbp_p=0.8 q1=0.33596159999999997 q2=0 q3=0.15999999999999998 q4=0.30666666666666659 q5=0.15999999999999998 q6=0.4910378666666666 q7=0 q8=0.15999999999999998 all=0.20170826666666664
rbp_resid_p=0.8 q1=0 q2=0 q3=0 q4=0 q5=0 q6=0 q7=0 q8=0 all=0
""",
    "-J -l2": """
num_ret q1=7 q2=1 q3=2 q4=3 q5=2 q6=7 q7=0 q8=2 all=24
num_rel q1=1 q2=0 q3=1 q4=2 q5=0 q6=4 q7=0 q8=0 all=8
num_rel_ret q1=1 q2=0 q3=1 q4=2 q5=0 q6=4 q7=0 q8=0 all=8
iprec_at_recall_0.00 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=1 q7=-nan q8=0 all=-nan
iprec_at_recall_0.10 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=1 q7=-nan q8=0 all=-nan
iprec_at_recall_0.20 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=1 q7=-nan q8=0 all=-nan
iprec_at_recall_0.30 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=1 q7=-nan q8=0 all=-nan
iprec_at_recall_0.40 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.75 q7=-nan q8=0 all=-nan
iprec_at_recall_0.50 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.75 q7=-nan q8=0 all=-nan
iprec_at_recall_0.60 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.75 q7=-nan q8=0 all=-nan
iprec_at_recall_0.70 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.75 q7=-nan q8=0 all=-nan
iprec_at_recall_0.80 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.75 q7=-nan q8=0 all=-nan
iprec_at_recall_0.90 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.5714285714285714 q7=-nan q8=0 all=-nan
iprec_at_recall_1.00 q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.5714285714285714 q7=-nan q8=0 all=-nan
Rprec_mult_0.20 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.25
Rprec_mult_0.40 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 all=0.1875
Rprec_mult_0.60 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.20833333333333331
Rprec_mult_0.80 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.21875
Rprec_mult_1.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.21875
Rprec_mult_1.20 q1=0.5 q2=0 q3=0.5 q4=0.66666666666666663 q5=0 q6=0.59999999999999998 q7=0 q8=0 all=0.28333333333333333
Rprec_mult_1.40 q1=0.5 q2=0 q3=0.5 q4=0.66666666666666663 q5=0 q6=0.5 q7=0 q8=0 all=0.27083333333333331
Rprec_mult_1.60 q1=0.5 q2=0 q3=0.5 q4=0.5 q5=0 q6=0.5714285714285714 q7=0 q8=0 all=0.2589285714285714
Rprec_mult_1.80 q1=0.5 q2=0 q3=0.5 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 all=0.25
Rprec_mult_2.00 q1=0.5 q2=0 q3=0.5 q4=0.5 q5=0 q6=0.5 q7=0 q8=0 all=0.25
utility q1=-5 q2=-1 q3=0 q4=1 q5=-2 q6=1 q7=0 q8=-2 all=-1
11pt_avg q1=0.5 q2=0 q3=0.5 q4=1 q5=0 q6=0.80844155844155841 q7=-nan q8=0 all=-nan
relative_P_1 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.25
relative_P_3 q1=1 q2=0 q3=1 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 all=0.45833333333333331
relative_P_5 q1=1 q2=0 q3=1 q4=1 q5=0 q6=0.75 q7=0 q8=0 all=0.46875
relative_P_10 q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_P q1=0.14285714285714285 q2=0 q3=0.5 q4=0.66666666666666663 q5=0 q6=0.5714285714285714 q7=0 q8=0 all=0.23511904761904759
set_relative_P q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_recall q1=1 q2=0 q3=1 q4=1 q5=0 q6=1 q7=0 q8=0 all=0.5
set_map q1=0.14285714285714285 q2=0 q3=0.5 q4=0.66666666666666663 q5=0 q6=0.5714285714285714 q7=0 q8=0 all=0.23511904761904759
set_F q1=0.25 q2=0 q3=0.66666666666666663 q4=0.80000000000000004 q5=0 q6=0.72727272727272729 q7=0 q8=0 all=0.30549242424242429
num_nonrel_judged_ret q1=6 q2=1 q3=1 q4=1 q5=2 q6=3 q7=0 q8=2 all=16
rbp q1=0.2096010333333333 q2=0 q3=0.089999999999999983 q4=0.15999999999999998 q5=0.089999999999999983 q6=0.30958239999999998 q7=0 q8=0.089999999999999983 all=0.11864792916666665
rbp_resid q1=0 q2=0 q3=0 q4=0 q5=0 q6=0 q7=0 q8=0 all=0
gm_map all=0.0025639485530733245
gm_bpref all=0.00016624155755874765
rbp_p=0.8 q1=0.33596159999999997 q2=0 q3=0.15999999999999998 q4=0.30666666666666659 q5=0.15999999999999998 q6=0.4910378666666666 q7=0 q8=0.15999999999999998 all=0.20170826666666664
rbp_resid_p=0.8 q1=0 q2=0 q3=0 q4=0 q5=0 q6=0 q7=0 q8=0 all=0
""",
    "-c -M3 -l2": """
num_ret q1=3 q2=3 q3=3 q4=3 q5=3 q6=3 q7=3 q8=3 q9=0 all=24
num_rel q1=1 q2=0 q3=1 q4=2 q5=0 q6=4 q7=0 q8=0 q9=2 all=23
num_rel_ret q1=0 q2=0 q3=0 q4=2 q5=0 q6=2 q7=0 q8=0 q9=0 all=4
iprec_at_recall_0.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
iprec_at_recall_0.10 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
iprec_at_recall_0.20 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
iprec_at_recall_0.30 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
iprec_at_recall_0.40 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
iprec_at_recall_0.50 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
iprec_at_recall_0.60 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
iprec_at_recall_0.70 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0 q9=0 all=0.1111111111111111
iprec_at_recall_0.80 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0 q9=0 all=0.1111111111111111
iprec_at_recall_0.90 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0 q9=0 all=0.1111111111111111
iprec_at_recall_1.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0 q7=0 q8=0 q9=0 all=0.1111111111111111
Rprec_mult_0.20 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
Rprec_mult_0.40 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
Rprec_mult_0.60 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
Rprec_mult_0.80 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
Rprec_mult_1.00 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
Rprec_mult_1.20 q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.40000000000000002 q7=0 q8=0 q9=0 all=0.11851851851851852
Rprec_mult_1.40 q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.33333333333333331 q7=0 q8=0 q9=0 all=0.1111111111111111
Rprec_mult_1.60 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.2857142857142857 q7=0 q8=0 q9=0 all=0.087301587301587297
Rprec_mult_1.80 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.25 q7=0 q8=0 q9=0 all=0.083333333333333329
Rprec_mult_2.00 q1=0 q2=0 q3=0 q4=0.5 q5=0 q6=0.25 q7=0 q8=0 q9=0 all=0.083333333333333329
utility q1=-3 q2=-3 q3=-3 q4=1 q5=-3 q6=1 q7=-3 q8=-3 q9=0 all=-1.7777777777777777
11pt_avg q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.54545454545454541 q7=0 q8=0 q9=0 all=0.17171717171717171
relative_P_1 q1=0 q2=0 q3=0 q4=1 q5=0 q6=1 q7=0 q8=0 q9=0 all=0.22222222222222221
relative_P_3 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
relative_P_5 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
relative_P_10 q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
set_P q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.14814814814814814
set_relative_P q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.66666666666666663 q7=0 q8=0 q9=0 all=0.18518518518518517
set_recall q1=0 q2=0 q3=0 q4=1 q5=0 q6=0.5 q7=0 q8=0 q9=0 all=0.16666666666666666
set_map q1=0 q2=0 q3=0 q4=0.66666666666666663 q5=0 q6=0.33333333333333331 q7=0 q8=0 q9=0 all=0.1111111111111111
set_F q1=0 q2=0 q3=0 q4=0.80000000000000004 q5=0 q6=0.57142857142857151 q7=0 q8=0 q9=0 all=0.15238095238095239
num_nonrel_judged_ret q1=1 q2=1 q3=0 q4=0 q5=1 q6=1 q7=0 q8=1 q9=0 all=5
rbp q1=0.033333333333333326 q2=0 q3=0 q4=0.15999999999999998 q5=0 q6=0.18399999999999997 q7=0 q8=0 q9=0 all=0.041925925925925922
rbp_resid q1=0.90000000000000002 q2=0.90000000000000002 q3=1 q4=0.81000000000000005 q5=0.91000000000000003 q6=0 q7=1 q8=0.91900000000000004 q9=0 all=0.71544444444444444
gm_map all=0.00011718321731849801
gm_bpref all=0.00011718321731849801
rbp_p=0.8 q1=0.066666666666666652 q2=0 q3=0 q4=0.30666666666666659 q5=0 q6=0.33866666666666662 q7=0 q8=0 q9=0 all=0.07911111111111109
rbp_resid_p=0.8 q1=0.80000000000000004 q2=0.80000000000000004 q3=1 q4=0.64000000000000012 q5=0.84000000000000008 q6=0 q7=1 q8=0.87200000000000011 q9=1 all=0.77244444444444449
""",
}


#: trec_eval's measure -> (evalcore's per-query column or None (printed for all only), its summary column)
OURS: dict = {"num_rel": ("num_rel", "num_rel"), "num_rel_ret": ("num_rel_ret", "num_rel_ret"),
              "gm_map": (None, "gm_map"), "gm_bpref": (None, "gm_bpref"), "11pt_avg": ("11pt_avg", "11pt_avg")}
OURS.update({f"iprec_at_recall_{x:.2f}": (f"iprec_at_recall_{x:.2f}",) * 2 for x in [i / 10 for i in range(11)]})
OURS.update({f"Rprec_mult_{x:.2f}": (f"rprec_mult_{x:.2f}",) * 2 for x in [i / 5 for i in range(1, 11)]})
OURS.update({f"relative_P_{k}": (f"relative_p_at_{k}",) * 2 for k in (1, 3, 5, 10)})
OURS.update({m: (m.lower(),) * 2 for m in ("num_ret", "set_P", "set_recall", "set_F", "set_map", "set_relative_P",
                                            "utility", "num_nonrel_judged_ret", "rbp", "rbp_resid")})
OURS.update({"rbp_p=0.8": ("rbp_0.80",) * 2, "rbp_resid_p=0.8": ("rbp_resid_0.80",) * 2})
#: the same measures as ``metrics=`` takes them, in trec_eval's spelling (case does not matter)
METRICS = ["num_rel", "num_rel_ret", "gm_map", "gm_bpref", "11pt_avg", *(m for m in OURS if m[0] in "iR"),
           "relative_P", "num_ret", "set_P", "set_recall", "set_F", "set_map", "set_relative_P", "utility",
           "num_nonrel_judged_ret", "rbp", "rbp_resid", "RBP(p=0.8)", "rbp_resid(p=0.8)"]


def printed(flags: str) -> dict:
    """{measure: {qid or 'all': value}} of trec_eval's printout above."""
    out: dict = {}
    for line in TREC_EVAL[flags].split("\n"):
        if line:
            name, *pairs = line.split()
            out[name] = {q: float(v) for q, v in (p.split("=") for p in pairs)}
    return out


def evalcore_values(tmp_path, flags: str) -> dict:
    """{trec_eval measure: {qid or 'all': value}} from import trec-run --order trec_eval and evaluate, trec_eval's
    flags read as evalcore's options (-l: --rel-level, -M: --depth, -J: --judged-only, -c: import --complete)."""
    words = flags.split()
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    out = tmp_path / "ds.zarr"
    importers.import_to("trec-run", [tmp_path / "run"], out, qrels=str(tmp_path / "qrels"), order="trec_eval",
                        complete="-c" in words)
    level = next((int(f[2:]) for f in words if f.startswith("-l")), 1)
    depth = next((int(f[2:]) for f in words if f.startswith("-M")), None)
    result = evaluate(out, Options(protocol="qrels", ks=(1, 3, 5, 10), empty_queries="zero", metrics=METRICS,
                                   rel_level=level, depth=depth, judged_only="-J" in words))
    got: dict = {name: {} for name in OURS}
    for row in result.per_query.to_pylist():
        for name, (column, _) in OURS.items():
            if column is not None:
                got[name][row["key"]] = row[column]
    summary = result.summary.to_pylist()[0]
    for name, (_, column) in OURS.items():
        got[name]["all"] = summary[column]
    return got


def without_empty_list_nan(want: dict) -> dict:
    """trec_eval's interpolated precision starts from num_rel_ret / num_ret, which is 0/0 (printed nan) for a
    query left with no document (q7 under -J: nothing of it judged), and its mean then is nan too. evalcore
    gives such a query 0 (nothing retrieved, nothing relevant found): the expected value is 0 there, and
    ``all`` the mean of trec_eval's per-query values with that 0."""
    out = {}
    for name, per in want.items():
        if any(math.isnan(v) for v in per.values()):
            per = {q: (0.0 if math.isnan(v) else v) for q, v in per.items() if q != "all"}
            per["all"] = math.fsum(per.values()) / len(per)
        out[name] = per
    return out


@pytest.mark.parametrize("flags", list(TREC_EVAL))
def test_every_measure_equals_trec_eval_per_query_and_all(tmp_path, flags):
    want = without_empty_list_nan(printed(flags))
    # trec_eval's rbp_resid is 0 where the list has no unjudged document: it leaves out the weight below the
    # list, p^num_ret, which Moffat and Zobel's residual (and evalcore's) keeps
    for name, p in (("rbp_resid", 0.9), ("rbp_resid_p=0.8", 0.8)):
        resid = want[name]
        for q in [q for q, v in resid.items() if q != "all" and v == 0]:
            resid[q] = p ** want["num_ret"][q]
        resid["all"] = math.fsum(v for q, v in resid.items() if q != "all") / (len(resid) - 1)
    if "-c" in flags and "-l2" in flags:
        # trec_eval's num_rel 'all' under -c counts every qrels line with a grade > 0, whatever -l
        # (m_num_rel.c, te_calc_avg_num_rel): 23 here, not the sum of its own per-query lines at -l2. evalcore's
        # summary is that sum
        assert want["num_rel"]["all"] == 23
        want["num_rel"]["all"] = sum(v for q, v in want["num_rel"].items() if q != "all")
    assert set(want) == set(OURS)
    got = evalcore_values(tmp_path, flags)
    wrong = [(m, q, got[m].get(q), v) for m, per in want.items() for q, v in per.items()
             if got[m].get(q) is None or not math.isclose(got[m][q], v, rel_tol=1e-12, abs_tol=1e-15)]
    assert not wrong, wrong
    # nothing printed by evalcore that trec_eval leaves out: q9 (no results) only with -c
    assert set(got["num_rel"]) == set(want["num_rel"])


def test_trec_eval_spellings_name_the_registered_metrics():
    assert registry.select(["Rprec_mult_0.20", "iprec_at_recall_0.10", "relative_P_5", "11pt_avg", "GM_MAP"]) == \
        ("rprec_mult_0.20", "iprec_at_recall_0.10", "relative_p@5", "11pt_avg", "gm_map")
    assert registry.lookup("relative_p_at_5").k == 5


def test_geometric_and_summed_summaries_and_their_intervals(tmp_path):
    """The summary of gm_map is the geometric mean of AP floored at 0.00001 (trec_eval's MIN_GEO_MEAN), of num_rel
    the sum; --ci gives each an interval around that figure: the bootstrap of the mean of the logs (of the values),
    carried through exp (times n), which are increasing. Checked against a brute force from the per-query table."""
    (tmp_path / "qrels").write_text(QRELS)
    (tmp_path / "run").write_text(RUN)
    out = tmp_path / "ds.zarr"
    importers.import_to("trec-run", [tmp_path / "run"], out, qrels=str(tmp_path / "qrels"), order="trec_eval")
    result = evaluate(out, Options(protocol="qrels", empty_queries="zero", metrics=["map", "gm_map", "num_rel"],
                                   ci=0.9, resamples=2000))
    rows = result.per_query.to_pylist()
    summary = result.summary.to_pylist()[0]
    ap = [row["ap"] for row in rows]
    assert summary["gm_map"] == pytest.approx(math.exp(sum(math.log(max(a, 0.00001)) for a in ap) / len(ap)),
                                              rel=1e-14)
    assert summary["num_rel"] == sum(row["n_relevant"] for row in rows) == printed("")["num_rel"]["all"]
    for name in ("map", "gm_map", "num_rel"):
        assert summary[f"{name}_ci_low"] < summary[name] < summary[f"{name}_ci_high"], name
    assert summary["gm_map"] < summary["map"]   # AM-GM: not the mean of the floored values
    assert summary["num_rel_ci_high"] <= 7 * len(rows)   # 7: the most relevant items of a query here


def test_a_scan_of_the_whole_gallery_retrieves_every_item_but_junk_and_cannot_tell_the_judged_ones(tmp_path):
    """A scan ranks the whole gallery but the query's junk: num_ret = G - n_junk and the set measures follow;
    with labels every item is judged (judged@k 1, num_nonrel_judged_ret the rest, rbp_resid p^n). Under qrels a
    scan cannot tell which retrieved items are judged: num_nonrel_judged_ret, judged@k and rbp_resid are an input
    error naming them (not a silent null); --judged-only ranks the judged pairs, and they work."""
    import numpy as np

    import evalcore
    from evalcore import InputError

    scores = np.random.default_rng(0).random((4, 6))
    labels = dict(query_labels=np.array([0, 1, 0, 1]), gallery_labels=np.array([0, 1, 0, 1, 2, 2]))
    names = ["num_ret", "set_p", "num_nonrel_judged_ret", "judged@1", "rbp_resid"]
    rows = evalcore.evaluate(scores=scores, metrics=names, **labels).per_query.to_pylist()
    assert [(r["num_ret"], r["set_p"], r["num_nonrel_judged_ret"], r["judged_at_1"], r["rbp_resid"]) for r in rows] \
        == [(6, 2 / 6, 4, 1, pytest.approx(0.9 ** 6))] * 4
    rng = np.random.default_rng(1)
    arrays = {"query/emb": rng.random((3, 4), dtype=np.float32), "gallery/emb": rng.random((8, 4), dtype=np.float32),
              "qrels/query": np.array([0, 0, 1, 1, 2]), "qrels/item": np.array([1, 2, 3, 4, 5]),
              "qrels/rel": np.array([1, 0, 1, -1, 1], dtype=np.int8)}
    evalcore.write_dataset(tmp_path / "ds.zarr", arrays)
    with pytest.raises(InputError, match=r"^metrics: num_nonrel_judged_ret, rbp_resid, judged@k need\(s\) to know "
                                         r"which retrieved items are judged"):
        evalcore.evaluate(tmp_path / "ds.zarr", protocol="qrels", metrics=names)
    plain = evalcore.evaluate(tmp_path / "ds.zarr", protocol="qrels", metrics=["num_ret"]).per_query
    assert plain.column("num_ret").to_pylist() == [8, 7, 8]   # query 1's item 4 is junk (-1)
    judged = evalcore.evaluate(tmp_path / "ds.zarr", protocol="qrels", metrics=names, judged_only=True).per_query
    assert judged.column("num_ret").to_pylist() == [2, 1, 1]
    assert judged.column("judged_at_1").to_pylist() == [1, 1, 1]
