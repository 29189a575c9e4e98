"""Per-user sparse count vectors: construction, validation, generators, files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from tests.stats import ALPHA, chi2_cells

from privhist.core.errors import InputDataError, ValidationError
from privhist.core.random import SeededRandom
from privhist.engines.local.federated_data import read_domain, read_user_counts
from privhist.federated.user_data import (
    UserCounts,
    from_records,
    gamma_variates,
    generate_heterogeneous,
    generate_iid,
    zipf_probabilities,
)

DATA = Path("/work/shared/data")


def test_from_records_matches_brute_force() -> None:
    users = np.array([5, 1, 5, 5, 9, 1])
    items = np.array([2, 0, 2, 3, 1, 0])
    u = from_records(users, items, dimension=4)
    dense = u.dense()
    expected = np.zeros((3, 4))
    for uu, it in zip(users, items, strict=True):
        expected[{1: 0, 5: 1, 9: 2}[int(uu)], it] += 1
    assert (dense == expected).all()
    assert u.l1_norms().tolist() == expected.sum(axis=1).tolist()
    assert np.allclose(u.l2_norms(), np.linalg.norm(expected, axis=1))
    assert np.allclose(u.mean_vector(), expected.mean(axis=0))
    assert (u.subset([2, 0]).dense() == expected[[2, 0]]).all()


def test_bad_user_data() -> None:
    with pytest.raises(InputDataError, match="holds no items"):
        UserCounts.from_arrays([0, 1, 1], [0], [1], 3)
    with pytest.raises(InputDataError, match="positive"):
        UserCounts.from_arrays([0, 1], [0], [-2], 3)
    with pytest.raises(ValidationError):
        UserCounts.from_arrays([0, 1], [0], [1], 0)
    with pytest.raises(InputDataError):
        from_records([1], [-1])


def test_iid_generator_follows_zipf() -> None:
    u = generate_iid(2000, 20, SeededRandom(1))
    assert (u.l1_norms() == 100).all()
    totals = np.bincount(u.items, weights=u.counts, minlength=20)
    p = zipf_probabilities(20)
    assert chi2_cells(totals, p) > ALPHA
    assert chi2_cells(totals, np.full(20, 1 / 20)) < ALPHA  # power


def test_gamma_sampler() -> None:
    for shape in (2.0, 0.3):
        g = np.exp(gamma_variates(np.full(100_000, shape), SeededRandom(4)))
        assert stats.kstest(g, "gamma", args=(shape,)).pvalue > ALPHA
        assert stats.kstest(g, "gamma", args=(shape * 1.05,)).pvalue < ALPHA  # power


def test_heterogeneous_generator() -> None:
    u = generate_heterogeneous(3000, 50, SeededRandom(2))
    sizes = u.l1_norms()
    assert sizes.min() >= 1
    assert abs(sizes.mean() - 100) < 5  # Poisson(100 n kappa_i) with n kappa_i of mean 1
    # users concentrate on few items (Dirichlet(p / 2) has total concentration 1/2)
    assert np.median(np.diff(u.indptr)) <= 5


@pytest.mark.skipif(not (DATA / "retail.dat").exists(), reason="retail.dat is not available")
def test_from_fimi_file_with_top_d() -> None:
    u = read_user_counts(DATA / "retail.dat", user=True, top_d=20)
    assert u.dimension == 20
    assert u.n_users + u.info["dropped_users"] == u.info["users_in_file"]
    assert u.l1_norms().min() >= 1


def test_from_csv_needs_the_user_column(tmp_path: Path) -> None:
    f = tmp_path / "r.csv"
    f.write_text("who,page\n1,a\n1,b\n2,a\n")
    u = read_user_counts(f, user="who", key="page")
    assert u.dense().tolist() == [[1.0, 1.0], [1.0, 0.0]]
    assert list(u.labels) == ["a", "b"]
    with pytest.raises(InputDataError):
        read_user_counts(f, user="nobody", key="page")


def _neighbouring_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two files that differ only in the items of user 3: in the first she holds "b" and the
    rare key "z", in the second only a key outside any domain."""
    rows = ["1,a", "1,b", "2,a", "3,b", "3,z", "4,c", "4,a"]
    changed = ["1,a", "1,b", "2,a", "3,q", "4,c", "4,a"]
    f, g = tmp_path / "one.csv", tmp_path / "two.csv"
    f.write_text("who,page\n" + "\n".join(rows) + "\n")
    g.write_text("who,page\n" + "\n".join(changed) + "\n")
    return f, g


def test_data_derived_domain_and_users_change_with_one_users_items(tmp_path: Path) -> None:
    """Why a public domain is needed: without it the item labels, d and the number of users
    all depend on what user 3 holds (not private; kept for the paper's experiments)."""
    f, g = _neighbouring_files(tmp_path)
    u, v = read_user_counts(f, user="who", key="page"), read_user_counts(g, user="who", key="page")
    assert list(u.labels) == ["a", "b", "c", "z"] and list(v.labels) == ["a", "b", "c", "q"]
    top_u = read_user_counts(f, user="who", key="page", top_d=2)
    top_v = read_user_counts(g, user="who", key="page", top_d=2)
    assert (top_u.n_users, top_v.n_users) == (4, 3)  # user 3 dropped from the second


def test_public_domain_keeps_every_user_and_fixes_the_items(tmp_path: Path) -> None:
    """With a public domain the labels, d and n are the same for both neighbouring files; user
    3 (only out-of-domain keys in the second file) is the zero vector there."""
    f, g = _neighbouring_files(tmp_path)
    dom = ["c", "a", "b", "never"]
    u = read_user_counts(f, user="who", key="page", domain=dom)
    v = read_user_counts(g, user="who", key="page", domain=dom)
    for w in (u, v):
        assert list(w.labels) == dom and w.dimension == 4 and w.n_users == 4
        assert w.info["users_in_file"] == 4 and w.info["dropped_users"] == 0
    assert u.dense().tolist() == [[0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 0]]
    assert v.dense().tolist() == [[0, 1, 1, 0], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]]
    assert (u.info["keys_outside_domain"], v.info["keys_outside_domain"]) == (1, 1)
    with pytest.raises(ValidationError):
        read_user_counts(f, user="who", key="page", domain=dom, top_d=2)
    with pytest.raises(ValidationError):
        read_user_counts(f, user="who", key="page", domain=["a", "a"])


def test_integer_keys_match_a_text_domain(tmp_path: Path) -> None:
    f = tmp_path / "r.fimi"
    f.write_text("1 2 2\n7\n3 1\n")
    u = read_user_counts(f, user=True, format="fimi", domain=["2", "1", "5"])
    assert u.dense().tolist() == [[2, 1, 0], [0, 0, 0], [0, 1, 0]]  # "2" twice on line 1
    assert u.info["keys_outside_domain"] == 2


def test_read_domain(tmp_path: Path) -> None:
    f = tmp_path / "dom.txt"
    f.write_text(" a\n\nb \nc\n")
    assert read_domain(f) == ["a", "b", "c"]
    f.write_text("a\nb\na\n")
    with pytest.raises(InputDataError, match="more than once"):
        read_domain(f)
    f.write_text("\n \n")
    with pytest.raises(InputDataError, match="empty"):
        read_domain(f)
    with pytest.raises(InputDataError, match="does not exist"):
        read_domain(tmp_path / "missing.txt")
