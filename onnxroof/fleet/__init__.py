"""Many models at once: the batch engine (this process, local processes or Dask), ``check`` over many models,
and ``audit`` (a model registry × platforms into one table, with a result cache).
"""
