"""Neighbouring relations: what one person's presence may change in the data.

Every mechanism states the relation its guarantee is for. The three relations are

* ``ADD_REMOVE``: datasets differ by adding or removing one record (one key occurrence);
* ``REPLACE``: datasets differ by replacing one record with another (two keys change by one);
* ``USER``: datasets differ by adding or removing everything one user holds, after contribution
  bounding to at most ``max_partitions_contributed`` distinct keys and at most
  ``max_contributions_per_partition`` records per key (the bounds PipelineDP names the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from privhist.core.errors import ValidationError
from privhist.core.validation import check_positive_int


class Relation(StrEnum):
    ADD_REMOVE = "add-remove"
    REPLACE = "replace"
    USER = "user"


@dataclass(frozen=True)
class Neighbouring:
    """A neighbouring relation with the contribution bounds of one privacy unit.

    >>> Neighbouring.user(3, 2).l1_sensitivity
    6
    >>> Neighbouring.replace().l0_sensitivity
    2
    """

    relation: Relation = Relation.ADD_REMOVE
    max_partitions_contributed: int = 1
    max_contributions_per_partition: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "relation", Relation(self.relation))
        k = check_positive_int(
            self.max_partitions_contributed, "Neighbouring", "max_partitions_contributed"
        )
        c = check_positive_int(
            self.max_contributions_per_partition, "Neighbouring", "max_contributions_per_partition"
        )
        if self.relation is not Relation.USER and (k, c) != (1, 1):
            # a single record touches one key once; replace touches two keys, which is encoded
            # in l0_sensitivity rather than in the bounds
            raise ValidationError(
                "max_partitions_contributed",
                "Neighbouring",
                f"1 (with max_contributions_per_partition 1) for {self.relation.value} "
                "neighbours; contribution bounds belong to user-level neighbours",
                (k, c),
            )
        object.__setattr__(self, "max_partitions_contributed", k)
        object.__setattr__(self, "max_contributions_per_partition", c)

    @classmethod
    def add_remove(cls) -> Neighbouring:
        return cls(Relation.ADD_REMOVE)

    @classmethod
    def replace(cls) -> Neighbouring:
        return cls(Relation.REPLACE)

    @classmethod
    def user(
        cls, max_partitions_contributed: int, max_contributions_per_partition: int = 1
    ) -> Neighbouring:
        return cls(Relation.USER, max_partitions_contributed, max_contributions_per_partition)

    @property
    def l0_sensitivity(self) -> int:
        """How many keys' counts one neighbouring step may change."""
        if self.relation is Relation.REPLACE:
            return 2
        return self.max_partitions_contributed

    @property
    def linf_sensitivity(self) -> int:
        """How much one key's count may change in one neighbouring step."""
        return self.max_contributions_per_partition

    @property
    def l1_sensitivity(self) -> int:
        return self.l0_sensitivity * self.linf_sensitivity

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(self.l0_sensitivity) * self.linf_sensitivity

    def describe(self) -> str:
        if self.relation is Relation.USER:
            return (
                f"user-level (max_partitions_contributed={self.max_partitions_contributed}, "
                f"max_contributions_per_partition={self.max_contributions_per_partition})"
            )
        if self.relation is Relation.REPLACE:
            return "replace one record"
        return "add or remove one record"

    def to_dict(self) -> dict[str, object]:
        return {
            "relation": self.relation.value,
            "max_partitions_contributed": self.max_partitions_contributed,
            "max_contributions_per_partition": self.max_contributions_per_partition,
        }
