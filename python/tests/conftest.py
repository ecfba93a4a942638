import os
import random

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    """A fresh numpy generator per test; its seed is printed (shown when the test fails)."""
    seed = random.SystemRandom().randrange(2**31)
    print(f"{request.node.name}: seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture
def user_kernels_path():
    path = os.environ.get("EAGLE_TEST_KERNELS")
    if not path or not os.path.exists(path):
        pytest.skip("EAGLE_TEST_KERNELS does not name the built test kernel library")
    return path


def random_values(rng, shape, dtype=np.float32):
    """Values in [0.5, 1.5) with random signs: never zero."""
    v = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    return v.astype(dtype)
