"""``jaxgbt launch``: N processes of one command on this machine, as one distributed run.

Each process gets the coordinator's address (127.0.0.1 and a free port), the number of
processes and its own id in the environment variables ``jaxgbt.distributed.initialize``
reads. The processes write to this terminal directly. When one exits with an error, the
others are stopped (terminated, then killed after a grace period) and its exit status is
returned, so that a failed run never leaves the others waiting for it.
"""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence

from jaxgbt.distributed import COORDINATOR_ENV, NUM_PROCESSES_ENV, PROCESS_ID_ENV

# How often the processes' exit statuses are read, and how long a stopped process has
# to exit after SIGTERM before it is killed.
POLL_SECONDS = 0.1
GRACE_SECONDS = 5.0


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the coordinator binds it)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _stop(processes: Sequence[subprocess.Popen], grace_seconds: float) -> None:
    """Terminates the processes still running; kills those alive after the grace."""
    running = [p for p in processes if p.poll() is None]
    for process in running:
        process.terminate()
    deadline = time.monotonic() + grace_seconds
    for process in running:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _status(returncode: int) -> int:
    """A shell's exit status for a return code (killed by signal s: 128 + s)."""
    return 128 - returncode if returncode < 0 else returncode


def launch(command: Sequence[str], n_processes: int, *, port: int | None = None,
           grace_seconds: float = GRACE_SECONDS) -> int:
    """Runs ``command`` as processes 0..n_processes-1 of a distributed run; waits for all.

    Args:
      command: the program and its arguments, e.g. ``["python", "train.py"]``.
      n_processes: how many processes, at least 1.
      port: the coordinator's port on 127.0.0.1; default: a free one.
      grace_seconds: how long the other processes have to exit after one failed.

    Returns:
      0 when every process exits with 0, else the first non-zero exit status seen (the
      others are then stopped).
    """
    if not command:
        raise ValueError("launch needs a command to run: jaxgbt launch --processes 2 -- "
                         "python train.py")
    if isinstance(n_processes, bool) or not isinstance(n_processes, int) or n_processes < 1:
        raise ValueError(f"--processes={n_processes!r}: use a whole number of at least 1.")
    address = f"127.0.0.1:{free_port() if port is None else port}"
    processes = []
    try:
        for process_id in range(n_processes):
            env = {**os.environ, COORDINATOR_ENV: address,
                   NUM_PROCESSES_ENV: str(n_processes), PROCESS_ID_ENV: str(process_id)}
            processes.append(subprocess.Popen(list(command), env=env))
        while True:
            codes = [p.poll() for p in processes]
            failed = next((c for c in codes if c not in (None, 0)), None)
            if failed is not None:
                _stop(processes, grace_seconds)
                return _status(failed)
            if all(c == 0 for c in codes):
                return 0
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        _stop(processes, grace_seconds)
        return 128 + signal.SIGINT
    except BaseException:
        _stop(processes, grace_seconds)
        raise
