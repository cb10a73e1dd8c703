"""Execution: planning chunks and shards, gallery blocks and their caches, Dask tasks, the reduce."""
