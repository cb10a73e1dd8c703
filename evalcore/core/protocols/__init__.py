"""Protocols: who is relevant and who is junk for each query (README, Protocols).

One module per protocol, each registering one ``Protocol`` (``base``) in
``registry``; ``truth`` holds the ``Truth`` record they build. Importing the
package registers them all, in the order importers try them.
"""
# importing a protocol's module registers it; this order is the order --help and messages list them in
from evalcore.core.protocols import reid  # noqa: F401, I001
from evalcore.core.protocols import classes, qrels, spatial  # noqa: F401
from evalcore.core.protocols.base import ChunkReader, Protocol, TruthOptions
from evalcore.core.protocols.classes import class_truth
from evalcore.core.protocols.inference import choosing_arrays, inferred_protocol, unused_arrays, unused_message
from evalcore.core.protocols.labels import label_candidates, label_index
from evalcore.core.protocols.registry import PROTOCOLS, get, implied, names, option_problems, register
from evalcore.core.protocols.reid import reid_truth
from evalcore.core.protocols.truth import Truth, csr_from_pairs, segment_ids, truth_from_pairs

__all__ = ["PROTOCOLS", "ChunkReader", "Protocol", "Truth", "TruthOptions", "choosing_arrays", "class_truth",
           "csr_from_pairs", "get", "implied", "inferred_protocol", "label_candidates", "label_index", "names",
           "option_problems", "register", "reid_truth", "segment_ids", "truth_from_pairs", "unused_arrays",
           "unused_message"]
