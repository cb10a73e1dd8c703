"""evalcore: exact, distributed evaluation of embedding retrieval.

The library is usable without a cluster; ``jobs`` decides where the work runs.
"""
from evalcore.errors import InputError

__version__ = "0.1.0"
__all__ = ["InputError", "__version__"]
