"""Growth exponents: power laws recovered, noise tolerated, unusable points left out."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_graphrag_ext.eval.scale.report import fit_exponent


@pytest.mark.parametrize("exponent", [0.5, 1.0, 1.3, 2.0])
def test_fit_exponent_recovers_power_laws(exponent):
    sizes = [1000, 4000, 16000, 64000]
    fit = fit_exponent(sizes, [0.02 * n**exponent for n in sizes])
    assert fit["exponent"] == pytest.approx(exponent, abs=1e-6)
    assert fit["r2"] == pytest.approx(1.0)
    assert fit["points"] == 4


def test_fit_exponent_with_noise_and_unusable_points():
    rng = np.random.default_rng(0)
    sizes = [1000, 2000, 4000, 8000, 16000, 32000, 64000]
    noisy = [5e-4 * n**1.2 * float(np.exp(rng.normal(0, 0.05))) for n in sizes]
    fit = fit_exponent(sizes, noisy)
    assert fit["exponent"] == pytest.approx(1.2, abs=0.05)
    assert 0.95 < fit["r2"] <= 1.0
    # Non-positive values (memory lost in noise) are left out.
    assert fit_exponent([10, 20, 40], [0.0, 2.0, 4.0])["points"] == 2
    assert fit_exponent([10, 20], [-1.0, 3.0]) is None
