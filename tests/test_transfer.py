"""jaxgbt.data.transfer: host arrays onto the device with one copy, never shared with the caller."""

import jax
import numpy as np
import pytest
from numpy.testing import assert_array_equal

from jaxgbt.data.transfer import aligned_copy, aligned_empty, to_device


@pytest.mark.parametrize("shape", [(0, 3), (7,), (5, 3), (40_000, 30)])
def test_aligned_empty_is_64_byte_aligned_and_contiguous(shape):
    array = aligned_empty(shape, np.float32)
    assert array.shape == shape and array.dtype == np.float32
    assert array.flags.c_contiguous
    assert array.size == 0 or array.ctypes.data % 64 == 0  # an empty array has no data


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, bool])
def test_aligned_copy_converts_every_row(dtype):
    # 40,000 x 30 float32 is over the threaded-copy size: the row blocks must meet.
    source = np.random.default_rng(0).normal(size=(40_000, 30)).astype(dtype)
    copy = aligned_copy(source, np.float32)
    assert copy.dtype == np.float32 and copy.ctypes.data % 64 == 0
    assert_array_equal(copy, source.astype(np.float32))


def test_to_device_does_not_share_memory_with_the_caller():
    source = np.arange(12, dtype=np.float32).reshape(4, 3)
    on_device = to_device(source, np.float32)
    source[0, 0] = 99.0
    assert isinstance(on_device, jax.Array)
    assert float(on_device[0, 0]) == 0.0
    assert_array_equal(np.asarray(on_device)[1:], source[1:])


def test_to_device_from_strided_float64_view():
    source = np.random.default_rng(1).normal(size=(9, 8))[::2, ::3]
    assert_array_equal(np.asarray(to_device(source, np.float32)), source.astype(np.float32))
