"""Ray: one evaluation sharded over the workers of a Ray cluster, with the results of a
local run.

``evaluate(cases, metrics, executor="ray")`` (or ``executor=RayExecutor(address=...,
num_workers=...)``), :func:`evaluate_dataset` for a ``ray.data.Dataset``, and
``contextlens run ... --ray ADDRESS|auto|local`` all come here.

* **Workers** are Ray actors, each running :func:`contextlens.runner.aevaluate` (the same
  scoring, cache, retries and accounting as a local run) on batches of cases; an actor loads
  its embedder once and scores two batches at a time, so the embedder's batches stay large.
* **Input** is read lazily: the driver consumes the cases (a loader's iterator, a list, or a
  dataset's blocks) as workers take batches, holding at most two batches per worker.
* **One rate limit for the cluster**: per judge backend, a small actor holds the engine's
  :class:`~contextlens.engine.limiter.Limiter` and hands out its slots, so every worker's
  calls count against one bound, and a rate limit lowers it once for the whole cluster.
* **Results**: with ``out``, a worker streams each batch's results into
  ``<run>/shards/<shard>.part-<attempt>/results.jsonl`` and renames the folder to
  ``<run>/shards/<shard>/`` when the batch is done; the driver appends each finished batch to
  ``<run>/results.jsonl`` and computes the summaries with the local run's own code, over the
  items in case order, so means and intervals equal a local run's. A batch whose worker died
  is redone by Ray on the restarted worker; only finished shards reach ``results.jsonl``, so
  nothing is counted twice. ``RayExecutor(resume=RUN_FOLDER)`` continues a run whose driver
  was killed: what ``results.jsonl`` and the shards hold is kept (whole cases only) and only
  the cases with no result are scored.
"""

from contextlens.scale.ray.driver import SHARDS
from contextlens.scale.ray.executor import RayExecutor, evaluate_dataset
from contextlens.scale.ray.permits import ClusterLimiter

__all__ = ["SHARDS", "ClusterLimiter", "RayExecutor", "evaluate_dataset"]
