"""Reading and writing: the Zarr dataset, its validation, ground-truth readers, reports, history, importers, submissions."""
