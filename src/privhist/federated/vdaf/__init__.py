"""Verifiable distributed aggregation: Prio3 of draft-irtf-cfrg-vdaf-20, vectorised.

Written from the draft text (draft-irtf-cfrg-vdaf-20, the Crypto Forum Research Group's
"Verifiable Distributed Aggregation Functions", tag ``draft-irtf-cfrg-vdaf-20``, commit
``5203892540a95e564dfa978345d16b40baf3c65d`` of its public repository); the draft's test vectors
are checked by ``privhist federated vdaf-check``.
"""
