"""``ozhpc`` with one phase slowed down, so that tests/test_signals.py can signal a rank there.

OZHPC_TEST_SLOW=write: the ranks spend SLOW_S in Python inside the write of C (the temporary
exists), creating and dropping weakly referenced objects as h5py does, so that a signal often
lands in a weakref callback; "after": the run is complete and its summary printed, and the
process waits SLOW_S before its exit steps; "join": the launcher's last rank waits SLOW_S before it
starts MPI, so that the others wait for it inside MPI_Init; "report": C is committed, and rank 0
spends SLOW_S before it writes the report while the other ranks wait in MPI_Finalize."""
import os
import sys
import time
import weakref

SLOW_S = 4.0


class _Obj:
    pass


def churn(seconds):
    table = weakref.WeakValueDictionary()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        objs = [_Obj() for _ in range(2000)]
        for i, obj in enumerate(objs):
            table[i] = obj
        del objs, obj  # 2000 weakref callbacks


def main():
    phase = os.environ["OZHPC_TEST_SLOW"]
    from ozhpc import signals

    signals.install()
    from ozhpc import cli
    from ozhpc.commands import lifecycle
    if phase == "write":
        from ozhpc.io import distio

        write = distio._write_all
        distio._write_all = lambda *a: (churn(SLOW_S), write(*a))[1]
    elif phase == "join":
        join = lifecycle.join
        last = os.environ.get("PMI_RANK") == str(int(os.environ.get("PMI_SIZE", "1")) - 1)
        lifecycle.join = lambda **kw: (time.sleep(SLOW_S if last else 0), join(**kw))[-1]
    elif phase == "report":
        from ozhpc.run import runner

        write = runner.write_report
        runner.write_report = lambda *a: (churn(SLOW_S), write(*a))[1]
    elif phase == "after":
        finish = lifecycle.finish
        lifecycle.finish = lambda: (sys.stdout.flush(), time.sleep(SLOW_S), finish())[-1]
    sys.argv = ["ozhpc"] + sys.argv[1:]
    cli.entry_point()


main()
