"""Drop-in modules with other tools' signatures, return values and definitions, computed by evalcore.

Switching is one import line; the numbers are evalcore's exact ones, under
the peer's own rules (which queries count, what a tie does), and each
module's docstring says where the peer's definition and evalcore's default
differ:

* ``evalcore.compat.torchreid.evaluate_rank``: torchreid's
  ``torchreid.metrics.rank.evaluate_rank`` (returns ``all_cmc, mAP``).
* ``evalcore.compat.fastreid.evaluate_rank``: fast-reid's
  ``fastreid.evaluation.rank.evaluate_rank`` (returns ``all_cmc, all_AP, all_INP``).
* ``evalcore.compat.pytrec_eval.RelevanceEvaluator``: pytrec_eval's
  (``RelevanceEvaluator(qrels, measures).evaluate(run)`` -> ``{qid: {measure: value}}``).
* ``evalcore.compat.ranx.evaluate``: ranx's ``evaluate(qrels, run, metrics)``.
* ``evalcore.compat.mteb.evaluate`` and ``information_retrieval_scores``: MTEB's retrieval scores
  (``ndcg_at_10``, ``map_at_100``, ...) and sentence-transformers' ``InformationRetrievalEvaluator``'s
  (``cosine_accuracy@1``, ``cosine_map@100``, ...) from embeddings, ids and qrels.
* ``evalcore.compat.torchmetrics``: torchmetrics' retrieval metrics from flat ``preds``, ``target``,
  ``indexes``: the functional forms (``retrieval_average_precision``, ``retrieval_normalized_dcg``, ...)
  and the module classes (``RetrievalMAP``, ``RetrievalNormalizedDCG``, ...; ``update``/``compute``).

The modules are imported by name, never by ``evalcore`` itself, so plain
``import evalcore`` does not pay for them.
"""
