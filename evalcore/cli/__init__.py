"""The ``evalcore`` command line."""
