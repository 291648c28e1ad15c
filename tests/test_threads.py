"""vrs_helpers.threads: one BLAS thread for small dense problems, the library default for large ones."""

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_info

from vrs_helpers import threads
from vrs_helpers.book import gam


def _blas_threads():
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_auto_limits_small_and_leaves_large():
    before = _blas_threads()
    with threads.blas_limit(threads.SMALL_DENSE - 1):
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
    with threads.blas_limit(threads.SMALL_DENSE):
        assert _blas_threads() == before
    with threads.blas_limit(10, None):
        assert _blas_threads() == before


@pytest.mark.parametrize("bad", [0, -1, 1.5, "two", True])
def test_bad_thread_count_is_refused(bad):
    with pytest.raises(ValueError, match="blas_threads"):
        threads.blas_limit(10, bad)


def test_gam_same_fit_with_any_thread_setting():
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"a": rng.uniform(size=500), "b": rng.uniform(size=500)})
    df["y"] = np.sin(6 * df["a"]) + df["b"] ** 2 + rng.normal(0, 0.3, 500)
    fits = [gam.fit_gam(df, "y", ["a", "b"], blas_threads=t) for t in ("auto", 1, None)]
    for f in fits[1:]:
        assert f.deviance_explained == pytest.approx(fits[0].deviance_explained, abs=1e-9)
        assert f.edf == pytest.approx(fits[0].edf, abs=1e-6)
