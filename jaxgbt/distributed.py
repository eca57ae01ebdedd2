"""Starting JAX's distributed runtime for ``fit(distributed=True)``.

``initialize()`` joins this process to the others of a run. It reads the coordinator's
address, the number of processes and this process's id from the arguments, else from
the environment variables ``jaxgbt launch`` sets (``COORDINATOR_ENV``,
``NUM_PROCESSES_ENV``, ``PROCESS_ID_ENV``), else leaves them to JAX's own detection
(Slurm, Open MPI, Kubernetes; ``jax.distributed.initialize``). JAX itself reads only the
coordinator's address from its environment (``JAX_COORDINATOR_ADDRESS``), not the count
and id, hence variables of our own.

On CPU, the collectives across processes go through Gloo, JAX's default
(``jax_cpu_collectives_implementation="gloo"``); nothing needs setting.
"""

import os

import jax

COORDINATOR_ENV = "JAXGBT_COORDINATOR_ADDRESS"
NUM_PROCESSES_ENV = "JAXGBT_NUM_PROCESSES"
PROCESS_ID_ENV = "JAXGBT_PROCESS_ID"

# A process that stops sending heartbeats for this long is taken as dead, and the others
# fail with an error instead of waiting in a collective. JAX's default is 100 s.
HEARTBEAT_TIMEOUT_SECONDS = 30


def _from_env(name: str, convert):
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    try:
        return convert(value)
    except ValueError:
        raise ValueError(f"environment variable {name}={value!r} is not an integer; "
                         "unset it or set a whole number.") from None


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, *,
               heartbeat_timeout_seconds: int = HEARTBEAT_TIMEOUT_SECONDS,
               initialization_timeout: int = 300) -> None:
    """Joins this process to a distributed run; call it first, before any JAX array.

    Args:
      coordinator_address: "host:port" of process 0's coordinator; default: the
        ``JAXGBT_COORDINATOR_ADDRESS`` environment variable, else JAX's detection.
      num_processes: how many processes train together; default:
        ``JAXGBT_NUM_PROCESSES``, else JAX's detection.
      process_id: this process's index, 0..num_processes-1; default:
        ``JAXGBT_PROCESS_ID``, else JAX's detection.
      heartbeat_timeout_seconds: after this long without a sign of life from a
        process, the others fail with an error rather than wait for it.
      initialization_timeout: seconds to wait for every process to join.
    """
    coordinator_address = coordinator_address or _from_env(COORDINATOR_ENV, str)
    num_processes = num_processes if num_processes is not None else _from_env(
        NUM_PROCESSES_ENV, int)
    process_id = process_id if process_id is not None else _from_env(PROCESS_ID_ENV, int)
    jax.distributed.initialize(coordinator_address, num_processes, process_id,
                               heartbeat_timeout_seconds=heartbeat_timeout_seconds,
                               initialization_timeout=initialization_timeout)


def shutdown() -> None:
    """Leaves the distributed run (also done by JAX when the process exits)."""
    jax.distributed.shutdown()
