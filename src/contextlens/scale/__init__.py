"""Scale out: one evaluation sharded over the workers of a cluster.

``contextlens.scale.ray`` (needs the ``ray`` extra) runs :func:`contextlens.evaluate` on a Ray
cluster with the same results as a local run; it is imported only when asked for
(``evaluate(..., executor="ray")``), so nothing else in contextlens imports Ray.
"""
