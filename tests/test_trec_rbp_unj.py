"""trec_eval's rbp_resid and unj, and rbp's persistence as trec_eval spells it (issue 38): ``evalcore trec`` and
``evalcore.trec`` against trec_eval 10's own numbers and a brute-force reference.

Expected values, by source (never evalcore's):

- ``FULL``: trec_eval 10.0-rc3 (usnistgov/trec_eval) built with its two print files' "%6.4f" changed to "%.17g"
  (in /tmp only; not committed), run as ``trec_eval -q FLAGS -m rbp -m rbp_resid -m unj qrels run`` on the files
  ``make_files()`` draws (random.Random(3801)): grades -2..3 (a negative one: in the pool, not judged),
  documents never judged in the run, tied scores (broken by docno, descending), q3 / q4 retrieving 1 / 4
  documents, q9 with nothing at -l2, q10 nothing relevant, q11 judged with negative grades only, q8 judged
  without results (-c), q12 never judged. Without -c trec_eval 10 stops at q8 ("result qid 'q8' not found in
  qrels", exit 4), so those rows were printed from the qrels without q8's lines; evalcore is given all of them
  (and leaves q8 out, with a warning). ``PARAMETERS``: the same build, ``-m rbp.p=0.8 -m rbp_resid.p=0.5
  -m unj.1,3,50``.
- ``LAYOUT`` / ``ALL_TREC``: the stock (4-decimal) build's stdout, byte for byte, of ``-q -m rbp.p=0.8
  -m rbp_resid -m unj.1,3,50`` and of ``-m all_trec`` (less its runid line: evalcore does not print it), on the
  qrels without q8.

Each printed double is written here as Python's shortest repr of the same double; values are compared to 1e-12
(relative; 1e-15 absolute). One difference is kept on purpose: under -c a judged query without results scores 0
on ``rbp_resid_p=X``, where trec_eval 10 prints 1: it scores such a query on a one-document ranking of an
unjudged document, then sets the leftovers back to 0 by their names, and ``rbp_resid_p=X`` is not ``rbp_resid``.
"""
import math
import random

import pytest
from trec_rules import assert_close, by_measure, trec_rankings

from evalcore.cli.main import main
from evalcore.core import registry

MEASURES = ("rbp", "rbp_resid", "unj")
GIVEN = ("rbp.p=0.8", "rbp_resid.p=0.5", "unj.1,3,50")

FULL = {
    '': {
        'rbp': {'q1': 0.2496596562333333, 'q10': 0.0, 'q11': 0.0, 'q2': 0.172060821, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.16519242333333334, 'q6': 0.154659, 'q7': 0.28965399666666664, 'q9': 0.2627887699, 'all': 0.1384014667133333},
        'rbp_resid': {'q1': 0.0, 'q10': 0.8636974348316907, 'q11': 1.0000000000000002, 'q2': 0.44646948900000016, 'q3': 0.0, 'q4': 0.81, 'q5': 0.5543374401000001, 'q6': 0.6124410000000001, 'q7': 0.5795162100000002, 'q9': 0.40714603780671016, 'all': 0.5273607611738401},
        'unj_5': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.4, 'q5': 0.4, 'q6': 0.2, 'q7': 0.2, 'q9': 0.2, 'all': 0.34},
        'unj_10': {'q1': 0.0, 'q10': 0.9, 'q11': 1.0, 'q2': 0.2, 'q3': 0.0, 'q4': 0.2, 'q5': 0.3, 'q6': 0.1, 'q7': 0.2, 'q9': 0.2, 'all': 0.31000000000000005},
        'unj_20': {'q1': 0.0, 'q10': 0.75, 'q11': 0.7, 'q2': 0.2, 'q3': 0.0, 'q4': 0.1, 'q5': 0.15, 'q6': 0.05, 'q7': 0.1, 'q9': 0.2, 'all': 0.225},
    },
    '-c': {
        'rbp': {'q1': 0.2496596562333333, 'q10': 0.0, 'q11': 0.0, 'q2': 0.172060821, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.16519242333333334, 'q6': 0.154659, 'q7': 0.28965399666666664, 'q8': 0.0, 'q9': 0.2627887699, 'all': 0.12581951519393939},
        'rbp_resid': {'q1': 0.0, 'q10': 0.8636974348316907, 'q11': 1.0000000000000002, 'q2': 0.44646948900000016, 'q3': 0.0, 'q4': 0.81, 'q5': 0.5543374401000001, 'q6': 0.6124410000000001, 'q7': 0.5795162100000002, 'q8': 0.0, 'q9': 0.40714603780671016, 'all': 0.4794188737944001},
        'unj_5': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.4, 'q5': 0.4, 'q6': 0.2, 'q7': 0.2, 'q8': 0.0, 'q9': 0.2, 'all': 0.30909090909090914},
        'unj_10': {'q1': 0.0, 'q10': 0.9, 'q11': 1.0, 'q2': 0.2, 'q3': 0.0, 'q4': 0.2, 'q5': 0.3, 'q6': 0.1, 'q7': 0.2, 'q8': 0.0, 'q9': 0.2, 'all': 0.28181818181818186},
        'unj_20': {'q1': 0.0, 'q10': 0.75, 'q11': 0.7, 'q2': 0.2, 'q3': 0.0, 'q4': 0.1, 'q5': 0.15, 'q6': 0.05, 'q7': 0.1, 'q8': 0.0, 'q9': 0.2, 'all': 0.20454545454545456},
    },
    '-M5': {
        'rbp': {'q1': 0.15033333333333332, 'q10': 0.0, 'q11': 0.0, 'q2': 0.07586999999999999, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.08193333333333332, 'q6': 0.09561, 'q7': 0.2205666666666666, 'q9': 0.18099999999999997, 'all': 0.08953133333333331},
        'rbp_resid': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.81, 'q5': 0.7371000000000002, 'q6': 0.6714900000000001, 'q7': 0.6804900000000002, 'q9': 0.6561000000000001, 'all': 0.5555180000000001},
        'unj_5': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.4, 'q5': 0.4, 'q6': 0.2, 'q7': 0.2, 'q9': 0.2, 'all': 0.34},
        'unj_10': {'q1': 0.0, 'q10': 0.5, 'q11': 0.5, 'q2': 0.0, 'q3': 0.0, 'q4': 0.2, 'q5': 0.2, 'q6': 0.1, 'q7': 0.1, 'q9': 0.1, 'all': 0.17},
        'unj_20': {'q1': 0.0, 'q10': 0.25, 'q11': 0.25, 'q2': 0.0, 'q3': 0.0, 'q4': 0.1, 'q5': 0.1, 'q6': 0.05, 'q7': 0.05, 'q9': 0.05, 'all': 0.085},
    },
    '-l2': {
        'rbp': {'q1': 0.2496596562333333, 'q10': 0.0, 'q11': 0.0, 'q2': 0.172060821, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.16519242333333334, 'q6': 0.154659, 'q7': 0.28965399666666664, 'q9': 0.2627887699, 'all': 0.1384014667133333},
        'rbp_resid': {'q1': 0.0, 'q10': 0.8636974348316907, 'q11': 1.0000000000000002, 'q2': 0.44646948900000016, 'q3': 0.0, 'q4': 0.81, 'q5': 0.5543374401000001, 'q6': 0.6124410000000001, 'q7': 0.5795162100000002, 'q9': 0.40714603780671016, 'all': 0.5273607611738401},
        'unj_5': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.4, 'q5': 0.4, 'q6': 0.2, 'q7': 0.2, 'q9': 0.2, 'all': 0.34},
        'unj_10': {'q1': 0.0, 'q10': 0.9, 'q11': 1.0, 'q2': 0.2, 'q3': 0.0, 'q4': 0.2, 'q5': 0.3, 'q6': 0.1, 'q7': 0.2, 'q9': 0.2, 'all': 0.31000000000000005},
        'unj_20': {'q1': 0.0, 'q10': 0.75, 'q11': 0.7, 'q2': 0.2, 'q3': 0.0, 'q4': 0.1, 'q5': 0.15, 'q6': 0.05, 'q7': 0.1, 'q9': 0.2, 'all': 0.225},
    },
    '-J': {
        'rbp': {'q1': 0.2496596562333333, 'q10': 0.0, 'q11': 0.0, 'q2': 0.18274869, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.20154333333333327, 'q6': 0.16851, 'q7': 0.3229596666666667, 'q9': 0.28197378999999995, 'all': 0.14973951362333332},
        'rbp_resid': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_5': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_10': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_20': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
    },
    '-c -J -l2 -M5': {
        'rbp': {'q1': 0.15033333333333332, 'q10': 0.0, 'q11': 0.0, 'q2': 0.07586999999999999, 'q3': 0.0, 'q4': 0.08999999999999998, 'q5': 0.0873333333333333, 'q6': 0.10289999999999999, 'q7': 0.23766666666666664, 'q8': 0.0, 'q9': 0.18099999999999997, 'all': 0.08410030303030303},
        'rbp_resid': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q8': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_5': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q8': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_10': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q8': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_20': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q8': 0.0, 'q9': 0.0, 'all': 0.0},
    },
}
PARAMETERS = {
    '': {
        'rbp_p=0.8': {'q1': 0.34650852693333334, 'q10': 0.0, 'q11': 0.0, 'q2': 0.19862323200000004, 'q3': 0.0, 'q4': 0.15999999999999998, 'q5': 0.21182890666666668, 'q6': 0.20078933333333335, 'q7': 0.4301431466666666, 'q9': 0.3883979776, 'all': 0.19362911231999996},
        'rbp_resid_p=0.5': {'q1': 0.0, 'q10': 0.9920263290405273, 'q11': 1.0, 'q2': 0.017578125, 'q3': 0.0, 'q4': 0.25, 'q5': 0.1728515625, 'q6': 0.140625, 'q7': 0.26953125, 'q9': 0.03948974609375, 'all': 0.2882102012634277},
        'unj_1': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.2},
        'unj_3': {'q1': 0.0, 'q10': 1.0, 'q11': 1.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.3333333333333333, 'q5': 0.3333333333333333, 'q6': 0.3333333333333333, 'q7': 0.3333333333333333, 'q9': 0.0, 'all': 0.33333333333333337},
        'unj_50': {'q1': 0.0, 'q10': 0.38, 'q11': 0.28, 'q2': 0.08, 'q3': 0.0, 'q4': 0.04, 'q5': 0.06, 'q6': 0.02, 'q7': 0.04, 'q9': 0.08, 'all': 0.098},
    },
    '-M3 -J': {
        'rbp_p=0.8': {'q1': 0.26933333333333326, 'q10': 0.0, 'q11': 0.0, 'q2': 0.08533333333333333, 'q3': 0.0, 'q4': 0.15999999999999998, 'q5': 0.06666666666666665, 'q6': 0.05333333333333332, 'q7': 0.2933333333333333, 'q9': 0.32799999999999996, 'all': 0.1256},
        'rbp_resid_p=0.5': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_1': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_3': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
        'unj_50': {'q1': 0.0, 'q10': 0.0, 'q11': 0.0, 'q2': 0.0, 'q3': 0.0, 'q4': 0.0, 'q5': 0.0, 'q6': 0.0, 'q7': 0.0, 'q9': 0.0, 'all': 0.0},
    },
}


LAYOUT = """\
rbp_p=0.8             	q1	0.3465
rbp_resid             	q1	0.0000
unj_1                 	q1	0.0000
unj_3                 	q1	0.0000
unj_50                	q1	0.0000
rbp_p=0.8             	q10	0.0000
rbp_resid             	q10	0.8637
unj_1                 	q10	1.0000
unj_3                 	q10	1.0000
unj_50                	q10	0.3800
rbp_p=0.8             	q11	0.0000
rbp_resid             	q11	1.0000
unj_1                 	q11	1.0000
unj_3                 	q11	1.0000
unj_50                	q11	0.2800
rbp_p=0.8             	q2	0.1986
rbp_resid             	q2	0.4465
unj_1                 	q2	0.0000
unj_3                 	q2	0.0000
unj_50                	q2	0.0800
rbp_p=0.8             	q3	0.0000
rbp_resid             	q3	0.0000
unj_1                 	q3	0.0000
unj_3                 	q3	0.0000
unj_50                	q3	0.0000
rbp_p=0.8             	q4	0.1600
rbp_resid             	q4	0.8100
unj_1                 	q4	0.0000
unj_3                 	q4	0.3333
unj_50                	q4	0.0400
rbp_p=0.8             	q5	0.2118
rbp_resid             	q5	0.5543
unj_1                 	q5	0.0000
unj_3                 	q5	0.3333
unj_50                	q5	0.0600
rbp_p=0.8             	q6	0.2008
rbp_resid             	q6	0.6124
unj_1                 	q6	0.0000
unj_3                 	q6	0.3333
unj_50                	q6	0.0200
rbp_p=0.8             	q7	0.4301
rbp_resid             	q7	0.5795
unj_1                 	q7	0.0000
unj_3                 	q7	0.3333
unj_50                	q7	0.0400
rbp_p=0.8             	q9	0.3884
rbp_resid             	q9	0.4071
unj_1                 	q9	0.0000
unj_3                 	q9	0.0000
unj_50                	q9	0.0800
rbp_p=0.8             	all	0.1936
rbp_resid             	all	0.5274
unj_1                 	all	0.2000
unj_3                 	all	0.3333
unj_50                	all	0.0980
"""

ALL_TREC = """\
num_q                 	all	10
num_ret               	all	104
num_rel               	all	73
num_rel_ret           	all	27
map                   	all	0.1919
gm_map                	all	0.0113
Rprec                 	all	0.2814
bpref                 	all	0.2206
recip_rank            	all	0.5333
iprec_at_recall_0.00  	all	0.5444
iprec_at_recall_0.10  	all	0.5444
iprec_at_recall_0.20  	all	0.4194
iprec_at_recall_0.30  	all	0.3736
iprec_at_recall_0.40  	all	0.3336
iprec_at_recall_0.50  	all	0.1500
iprec_at_recall_0.60  	all	0.0400
iprec_at_recall_0.70  	all	0.0400
iprec_at_recall_0.80  	all	0.0400
iprec_at_recall_0.90  	all	0.0000
iprec_at_recall_1.00  	all	0.0000
P_5                   	all	0.3000
P_10                  	all	0.2700
P_15                  	all	0.1800
P_20                  	all	0.1350
P_30                  	all	0.0900
P_100                 	all	0.0270
P_200                 	all	0.0135
P_500                 	all	0.0054
P_1000                	all	0.0027
recall_5              	all	0.1773
recall_10             	all	0.3214
recall_15             	all	0.3214
recall_20             	all	0.3214
recall_30             	all	0.3214
recall_100            	all	0.3214
recall_200            	all	0.3214
recall_500            	all	0.3214
recall_1000           	all	0.3214
infAP                 	all	0.2119
gm_bpref              	all	0.0132
Rprec_mult_0.20       	all	0.4167
Rprec_mult_0.40       	all	0.2933
Rprec_mult_0.60       	all	0.3020
Rprec_mult_0.80       	all	0.2939
Rprec_mult_1.00       	all	0.2814
Rprec_mult_1.20       	all	0.2262
Rprec_mult_1.40       	all	0.1942
Rprec_mult_1.60       	all	0.1712
Rprec_mult_1.80       	all	0.1633
Rprec_mult_2.00       	all	0.1607
utility               	all	-5.0000
11pt_avg              	all	0.2260
binG                  	all	0.1831
G                     	all	0.1361
ndcg                  	all	0.2955
ndcg_rel              	all	0.2909
Rndcg                 	all	0.2615
ndcg_cut_5            	all	0.2326
ndcg_cut_10           	all	0.3001
ndcg_cut_15           	all	0.2955
ndcg_cut_20           	all	0.2955
ndcg_cut_30           	all	0.2955
ndcg_cut_100          	all	0.2955
ndcg_cut_200          	all	0.2955
ndcg_cut_500          	all	0.2955
ndcg_cut_1000         	all	0.2955
map_cut_5             	all	0.1245
map_cut_10            	all	0.1919
map_cut_15            	all	0.1919
map_cut_20            	all	0.1919
map_cut_30            	all	0.1919
map_cut_100           	all	0.1919
map_cut_200           	all	0.1919
map_cut_500           	all	0.1919
map_cut_1000          	all	0.1919
relative_P_5          	all	0.3000
relative_P_10         	all	0.3384
relative_P_15         	all	0.3214
relative_P_20         	all	0.3214
relative_P_30         	all	0.3214
relative_P_100        	all	0.3214
relative_P_200        	all	0.3214
relative_P_500        	all	0.3214
relative_P_1000       	all	0.3214
success_1             	all	0.4000
success_5             	all	0.7000
success_10            	all	0.7000
set_P                 	all	0.2940
set_relative_P        	all	0.3665
set_recall            	all	0.3214
set_map               	all	0.1357
set_F                 	all	0.2883
num_nonrel_judged_ret 	all	28
rbp                   	all	0.1384
rbp_resid             	all	0.5274
unj_5                 	all	0.3400
unj_10                	all	0.3100
unj_20                	all	0.2250
"""


def make_files(seed=3801):
    """(qrels text, run text): a random graded run for rbp, rbp_resid and unj."""
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(50)]
    qrels, run = [], []
    for q in range(1, 12):
        qid = f"q{q}"
        judged = rng.sample(docs, 20)
        grades = {9: [-1, 0, 0, 1], 10: [-2, -1, 0], 11: [-1, -2]}.get(q, [-2, -1, 0, 0, 0, 1, 1, 2, 3])
        qrels += [f"{qid} 0 {d} {rng.choice(grades)}" for d in judged]
        if q == 8:       # judged, no results
            continue
        length = {3: 1, 4: 4}.get(q, rng.randint(5, 28))
        listed = rng.sample(judged[:10], min(length, 10))
        listed += [d for d in rng.sample(docs, 50) if d not in listed][:length - len(listed)]
        if q == 5:       # every listed document judged (rbp_resid 0)
            listed = [d for d in listed if d in judged[:10]]
        for rank, d in enumerate(listed, start=1):
            run.append(f"{qid} Q0 {d} {rank} {rng.choice([9, 8, 8, 7, 7, 6, 5, 5, 3, 1])} seed{seed}")
    run += [f"q12 Q0 d{i:02d} {i} 1 seed{seed}" for i in range(1, 4)]   # never judged
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trec38rbp")
    qrels, run = make_files()
    (folder / "qrels").write_text(qrels)
    (folder / "run").write_text(run)
    return str(folder / "qrels"), str(folder / "run")


@pytest.mark.parametrize("flags", sorted(FULL))
def test_rbp_resid_and_unj_equal_trec_eval_at_full_precision(files, flags):
    got = by_measure(*files, MEASURES, flags)
    assert_close(got, FULL[flags], flags or "no flags")
    assert set(got["rbp"]) == set(FULL[flags]["rbp"])   # q8 without -c and q12 left out, as trec_eval


@pytest.mark.parametrize("flags", sorted(PARAMETERS))
def test_the_persistence_and_cutoffs_as_trec_eval_spells_them(files, flags):
    assert_close(by_measure(*files, GIVEN, flags), PARAMETERS[flags], flags or "no flags")


def test_a_judged_query_without_results_scores_0_under_c(files):
    got = by_measure(*files, GIVEN, "-c")
    assert got["rbp_resid_p=0.5"]["q8"] == got["unj_50"]["q8"] == got["rbp_p=0.8"]["q8"] == 0.0
    assert got["rbp_resid_p=0.5"]["all"] == pytest.approx(
        math.fsum(PARAMETERS[""]["rbp_resid_p=0.5"][q] for q in PARAMETERS[""]["rbp_p=0.8"] if q != "all") / 11,
        rel=1e-12)


# --------------------------------------------------------------------------- brute force, from the definitions


def unjudged(grade) -> bool:
    return grade is None or grade < 0


def rbp_resid(ranking, p=0.9) -> float:
    """Moffat and Zobel's residual as trec_eval sums it: p^n + (1 - p) * sum of p^(i-1) over the unjudged places
    i, and 0 when there is none."""
    if not any(unjudged(g) for g in ranking):
        return 0.0
    return p ** len(ranking) + (1 - p) * sum(p ** i for i, g in enumerate(ranking) if unjudged(g))


def unj(ranking, k) -> float:
    """The unjudged documents among the first k places, over k."""
    return sum(1 for g in ranking[:k] if unjudged(g)) / k


@pytest.mark.parametrize("flags", sorted(FULL))
def test_they_match_a_brute_force_reference(files, flags):
    got = {**by_measure(*files, MEASURES, flags), **by_measure(*files, ("unj.1,3,50", "rbp_resid.p=0.5"), flags)}
    with open(files[0]) as qrels, open(files[1]) as run:
        rankings = trec_rankings(qrels.read(), run.read(), flags)
    assert set(rankings) == set(got["rbp_resid"]) - {"all"}
    for qid, (ranking, _) in rankings.items():
        want = {"rbp_resid": rbp_resid(ranking), "rbp_resid_p=0.5": rbp_resid(ranking, 0.5),
                **{f"unj_{k}": unj(ranking, k) for k in (1, 3, 5, 10, 20, 50)}}
        for measure, value in want.items():
            assert got[measure][qid] == pytest.approx(value, rel=1e-12, abs=1e-15), (flags, measure, qid)


# --------------------------------------------------------------------------- the printout


def command(capsys, *argv) -> tuple[int, str, str]:
    code = main(["trec", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_printout_is_trec_eval_s_byte_for_byte(capsys, files):
    code, out, _ = command(capsys, "-q", "-m", "rbp.p=0.8", "-m", "rbp_resid", "-m", "unj.1,3,50", *files)
    assert code == 0 and out == LAYOUT


def test_all_trec_ends_with_them_as_trec_eval_prints_it(capsys, files):
    code, out, _ = command(capsys, "-m", "all_trec", *files)
    assert code == 0 and out == ALL_TREC
    assert out.splitlines()[-5:] == [line for line in ALL_TREC.splitlines() if line.startswith(("rbp", "unj"))]


def test_a_persistence_given_replaces_the_default_and_two_print_both(capsys, files):
    code, out, _ = command(capsys, "-m", "all_trec", "-m", "rbp.p=0.8", "-m", "rbp.p=0.5", *files)
    names = [line.split("\t")[0].strip() for line in out.splitlines()]
    assert code == 0 and names[-6:] == ["rbp_p=0.8", "rbp_p=0.5", "rbp_resid", "unj_5", "unj_10", "unj_20"]


@pytest.mark.parametrize(("measure", "words"), [
    ("rbp.2=5", "-m: 'rbp.2=5': evalcore takes rbp's persistence alone, as rbp.p=0.8 (not trec_eval's gain pairs)"),
    ("rbp.p=0.8,2=5", "-m: 'rbp.p=0.8,2=5': evalcore takes rbp's persistence alone"),
    ("rbp_resid.p=1", "-m: 'rbp_resid.p=1': the persistence p must be a number between 0 and 1"),
    ("rbp.p=x", "-m: 'rbp.p=x': the persistence p must be a number between 0 and 1"),
    ("unj.0", "-m: 'unj.0': cut-off '0' is not an integer"),
])
def test_a_bad_parameter_is_one_line_naming_the_flag(capsys, files, measure, words):
    code, out, err = command(capsys, "-m", measure, *files)
    assert code == 2 and out == ""
    assert err.startswith(f"evalcore: error: {words}") and err.count("\n") == 1, err


def test_unj_is_a_metric_evalcore_evaluate_takes():
    assert registry.select(["unj@5", "unj_at_10"]) == ("unj@5", "unj@10")
    assert registry.direction("unj_at_5") == "lower"
