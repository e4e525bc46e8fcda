"""Input formats: where predictions come from, and how results are written as JSON.

- :mod:`~calibkit.io.prediction_files`: one file of predictions (``.npz``, ``.npy`` pairs,
  Parquet, CSV, JSON Lines) into arrays, with their checks;
- :mod:`~calibkit.io.shards`: a folder or glob of such files streamed in bounded memory, ACE exact
  by extra passes;
- :mod:`~calibkit.io.dask`: the report of a Dask array or data frame on a cluster;
- :mod:`~calibkit.io.jsonable`: numpy values as JSON.

Nothing here imports the package's modules on import: ``import calibkit.io.shards`` loads only
what shards need.
"""
