"""The one pool of worker processes: results in order or as they come, errors sent home, and a
stop that is at once, whatever the workers were doing (sleeping, sending a large result, dead)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time

import pytest

from qkvquiz.core.pool import Pool, TaskFailed, WorkerDied

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")


def square(x: int) -> int:
    time.sleep(0.01 * (x % 3))  # finished out of order
    return x * x


def fail(x: int) -> int:
    raise ValueError(f"no good: {x}")


class Unpicklable(Exception):
    def __reduce__(self):
        raise pickle.PicklingError("not this one")


def fail_oddly(x: int) -> int:
    raise Unpicklable("an odd failure")


def die(x: int) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return x


def pid(_x: int) -> int:
    return os.getpid()


def test_results_come_back_in_the_order_asked_and_all_of_them():
    with Pool(3) as pool:
        tasks = [pool.submit(square, x) for x in range(20)]
        assert list(pool.ordered(tasks)) == [x * x for x in range(20)]
        more = [pool.submit(square, x) for x in range(5)]
        assert sorted(pool.completed()) == sorted(zip(more, [x * x for x in range(5)]))
        assert pool.pending == 0


def test_a_tasks_error_is_raised_here_with_its_type():
    with pytest.raises(ValueError, match="no good: 4"), Pool(2) as pool:
        list(pool.ordered([pool.submit(fail, 4)]))


def test_an_error_that_cannot_travel_arrives_as_its_text():
    with pytest.raises(TaskFailed, match="Unpicklable: an odd failure"), Pool(1) as pool:
        list(pool.ordered([pool.submit(fail_oddly, 1)]))


def test_a_worker_that_dies_ends_the_run_with_an_error_not_a_wait():
    with pytest.raises(WorkerDied, match="killed by SIGKILL"), Pool(2) as pool:
        list(pool.ordered([pool.submit(die, 1), pool.submit(square, 2)]))


def test_workers_are_gone_after_the_block_either_way():
    with Pool(2) as pool:
        pids = set(pool.ordered([pool.submit(pid, i) for i in range(4)]))
    with pytest.raises(RuntimeError), Pool(2) as failing:
        failing_pids = set(failing.ordered([failing.submit(pid, i) for i in range(4)]))
        raise RuntimeError("the caller's own error")
    for worker in pids | failing_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(worker, 0)  # reaped: no such process


STOPPED_MIDWAY = r"""
import time
from qkvquiz.core.pool import Pool

def large(x):
    return b"x" * (64 << 20)  # far more than a pipe holds: the worker blocks in its send

def sleepy(x):
    time.sleep(600)

try:
    with Pool(3) as pool:
        pool.submit(large, 0)
        pool.submit(sleepy, 1)
        pool.submit(sleepy, 2)
        time.sleep(0.5)
        raise KeyboardInterrupt  # as Ctrl-C would, with nothing read
except KeyboardInterrupt:
    print("stopped")
"""


def test_a_pool_stopped_midway_lets_the_process_end(tmp_path):
    # A stopped pool whose worker was halfway through sending a result left a thread waiting
    # for the rest, and the interpreter waiting for that thread at exit: the run hung.
    script = tmp_path / "stop.py"
    script.write_text(STOPPED_MIDWAY)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr


def test_workers_leave_ctrl_c_to_this_process():
    with Pool(1) as pool:
        handler = next(pool.ordered([pool.submit(signal.getsignal, signal.SIGINT)]))
    assert handler == signal.SIG_IGN


KILLED_MID_SEND = r"""
import multiprocessing, os, signal, time
from qkvquiz.core.pool import Pool, WorkerDied

def large(x):
    return b"x" * (16 << 20)  # far more than a pipe holds: the worker blocks in its send

with Pool(1) as pool:
    task = pool.submit(large, 0)
    time.sleep(1.0)  # nothing read yet: part of the result is in the pipe, the worker waits
    for child in multiprocessing.active_children():
        os.kill(child.pid, signal.SIGKILL)
    try:
        list(pool.ordered([task]))
    except WorkerDied as error:
        print("died:", error)
"""


def test_a_worker_killed_halfway_through_sending_a_result_is_an_error_not_a_wait(tmp_path):
    # What generate once passed through files to avoid: a result bigger than a pipe, cut off
    # halfway by the worker's death. The reader gets the pipe's end and says which worker died.
    script = tmp_path / "killed.py"
    script.write_text(KILLED_MID_SEND)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("died:") and "SIGKILL" in done.stdout, done.stderr
