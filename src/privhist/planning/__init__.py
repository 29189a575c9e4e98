"""What a mechanism will do before any data is touched: parameters, reporting probabilities,
noise, and the choice of the default mechanism."""

from privhist.planning.plan import Candidate, choose_default, plan, rank_candidates

__all__ = ["Candidate", "choose_default", "plan", "rank_candidates"]
