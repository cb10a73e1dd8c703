#!/usr/bin/env python3
"""Codabench / CodaLab scoring program: ``python3 score.py INPUT OUTPUT`` (see metadata.yaml).

INPUT/ref: the truth bundle; INPUT/res: the participant's query.npy + gallery.npy (or a Zarr group,
or a .zip/.npz of the two); writes OUTPUT/scores.json and OUTPUT/scores.txt (map_public).
The container image needs evalcore installed (deploy/ builds one).
"""
import sys

from evalcore.challenge.codabench import main

if __name__ == "__main__":
    sys.exit(main())
