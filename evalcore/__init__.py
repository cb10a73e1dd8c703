"""evalcore: exact, distributed evaluation of embedding retrieval.

    import evalcore
    result = evalcore.evaluate("ds.zarr")                      # or query=..., gallery=..., query_labels=...
    result.metrics["map"], result.per_query, result.save("report")

The public names are below; everything else may change. They are imported on
first use, so ``import evalcore`` (and the command line's start) stays quick.
"""
import importlib

from evalcore.errors import (
    ArrayError,
    DatasetNotFoundError,
    EvalcoreWarning,
    InputError,
    OptionError,
    UnknownNameError,
)

__version__ = "0.1.0"
__all__ = ["ArrayError", "DatasetNotFoundError", "EvalcoreWarning", "InputError", "OptionError", "Result", "UnknownNameError", "__version__", "compare", "cuhk03", "evaluate",
           "ann_recall", "gap", "metric_names", "neighbors", "open_dataset", "read_report", "trec", "validate", "write_dataset"]

_LAZY = {"evaluate": "evalcore.api", "compare": "evalcore.api", "Result": "evalcore.api", "validate": "evalcore.api", "metric_names": "evalcore.api",
         "neighbors": "evalcore.api", "trec": "evalcore.trec_api",
         "gap": "evalcore.measures_api", "ann_recall": "evalcore.measures_api", "cuhk03": "evalcore.cuhk03_api",
         "open_dataset": "evalcore.io.dataset", "write_dataset": "evalcore.io.dataset",
         "read_report": "evalcore.io.report"}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evalcore' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
