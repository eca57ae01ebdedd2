"""experiments/profile_fit.py's summary of a jax.profiler trace: kernels summed by name
and by name less its numeric suffix, Python threads' own events left out. The profile
itself is a benchmark, not run here."""

import pytest
from conftest import experiment_modules


@pytest.fixture(scope="module")
def profile_fit():
    with experiment_modules("profile_fit") as (module,):
        yield module


def _trace():
    names = [dict(ph="M", name="thread_name", pid=1, tid=tid, args=dict(name=name))
             for tid, name in [(10, "tf_XLAEigen/12"), (11, "tf_XLAEigen/-7"), (20, "python3")]]
    events = [dict(ph="X", pid=1, tid=10, name="wrapped_scatter.3", dur=5.0),
              dict(ph="X", pid=1, tid=11, name="wrapped_scatter.12", dur=7.0),
              dict(ph="X", pid=1, tid=10, name="wrapped_scatter.3", dur=1.0),
              dict(ph="X", pid=1, tid=11, name="fusion", dur=2.0),
              dict(ph="X", pid=1, tid=99, name="$builtins.len", dur=4.0),
              dict(ph="X", pid=1, tid=20, name="PjitFunction(fit)", dur=30.0),
              dict(ph="i", pid=1, tid=10, name="instant")]
    return {"traceEvents": names + events}


def test_kernel_times_sum_by_name_and_leave_out_python(profile_fit):
    by_thread, totals, calls = profile_fit.kernel_times(_trace())
    assert dict(totals) == {"wrapped_scatter.3": 6.0, "wrapped_scatter.12": 7.0, "fusion": 2.0}
    assert calls["wrapped_scatter.3"] == 2
    assert by_thread["tf_XLAEigen/#"] == 6.0 + 7.0 + 2.0  # both pool threads, one kind
    assert by_thread["python#"] == 30.0 and by_thread["?"] == 4.0


def test_by_prefix_joins_a_kernels_numbered_copies(profile_fit):
    _, totals, calls = profile_fit.kernel_times(_trace())
    prefix_totals, prefix_calls = profile_fit.by_prefix(totals, calls)
    assert dict(prefix_totals) == {"wrapped_scatter": 13.0, "fusion": 2.0}
    assert prefix_calls["wrapped_scatter"] == 3
