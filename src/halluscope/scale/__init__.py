"""Scale-out: batch scoring on Ray (the optional extra ``pip install 'halluscope[ray]'``).

:func:`score_with_ray` scores files, lists of records or a Ray Dataset on a Ray cluster with the same scores as one
process; :func:`read_output` reads its Parquet parts back as one DataFrame. Importing this package does not import
Ray: only calling :func:`score_with_ray` needs it.
"""

from .output import read_output
from .ray_batch import RAY_MISSING, RayRun, require_ray, score_with_ray

__all__ = ["RAY_MISSING", "RayRun", "read_output", "require_ray", "score_with_ray"]
