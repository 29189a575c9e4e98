"""Who shares secrets and masks with whom: the complete graph (SecAgg) or a random Harary graph
(SecAgg+).

Bonawitz et al. (CCS 2017), Section 4, pair every two clients. Bell et al. (CCS 2020)
replace the complete graph by a sparse ``k``-regular graph: each client masks with, and secret-
shares to, only its ``k`` neighbours, so per-client work is ``O(k)`` instead of ``O(n)``. As in
their construction the graph is a Harary graph ``H(k, n)`` (position ``i`` adjacent to positions
``i +- 1, ..., i +- k/2`` modulo ``n``) on a uniformly random permutation of the clients, drawn by
the server after the keys are advertised.
"""

from __future__ import annotations

from privhist.core.errors import ValidationError
from privhist.core.random import RandomSource

Graph = dict[int, frozenset[int]]


def complete_graph(ids: list[int]) -> Graph:
    """Every client adjacent to every other (SecAgg).

    >>> sorted(complete_graph([0, 1, 2])[1])
    [0, 2]
    """
    all_ids = frozenset(ids)
    return {i: all_ids - {i} for i in ids}


def harary_graph(ids: list[int], k: int, rng: RandomSource) -> Graph:
    """A Harary graph ``H(k, n)`` over a random permutation of ``ids`` (``k`` even).

    When ``k >= n - 1`` this is the complete graph.
    """
    n = len(ids)
    if k < 2 or k % 2:
        raise ValidationError("neighbours", "harary_graph", "an even integer >= 2", k)
    if k >= n - 1:
        return complete_graph(ids)
    order = list(ids)
    for i in range(n - 1, 0, -1):  # Fisher-Yates with exact uniform draws
        j = rng.randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    adj: dict[int, set[int]] = {i: set() for i in ids}
    for pos, u in enumerate(order):
        for step in range(1, k // 2 + 1):
            v = order[(pos + step) % n]
            adj[u].add(v)
            adj[v].add(u)
    return {u: frozenset(vs) for u, vs in adj.items()}
