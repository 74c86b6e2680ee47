"""Rank-to-GPU selection from launcher variables and CUDA_VISIBLE_DEVICES (no GPU needed)."""
import pytest

from ozhpc.parallel.localrank import (LOCAL_RANK_VARS, format_layout, local_rank, local_rank_from_env, rank_layout,
                                  select_device, visible_devices)


@pytest.mark.parametrize("name", LOCAL_RANK_VARS)
def test_each_launcher_variable_is_read(name):
    assert local_rank_from_env({name: "3"}) == (3, name)
    assert local_rank(None, {name: "3"}) == (3, name)


def test_mpi_launcher_variables_win_over_an_inherited_slurm_localid():
    # mpiexec inside an sbatch script: every rank inherits SLURM_LOCALID=0 from the batch step
    env = {"SLURM_LOCALID": "0", "MPI_LOCALRANKID": "2"}
    assert local_rank(None, env) == (2, "MPI_LOCALRANKID")
    env = {"SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "PMI_LOCAL_RANK": "5"}
    assert local_rank(None, env) == (1, "OMPI_COMM_WORLD_LOCAL_RANK")


def test_bad_values_are_errors():
    with pytest.raises(ValueError, match="SLURM_LOCALID='x' is not an integer"):
        local_rank_from_env({"SLURM_LOCALID": "x"})
    with pytest.raises(ValueError, match="is negative"):
        local_rank_from_env({"MPI_LOCALRANKID": "-1"})
    assert local_rank_from_env({"SLURM_LOCALID": ""}) is None


def test_no_variable_no_comm_is_zero():
    assert local_rank(None, {}) == (0, "default")


def test_no_variable_uses_shared_memory_split():
    from mpi4py import MPI

    assert local_rank(MPI.COMM_WORLD, {}) == (MPI.COMM_WORLD.Get_rank(), "COMM_TYPE_SHARED")


@pytest.mark.parametrize("text, entries", [
    (None, None), ("", []), ("0", ["0"]), ("2,3", ["2", "3"]), (" 1, 0 ", ["1", "0"]),
    ("GPU-8a2f,GPU-77c1", ["GPU-8a2f", "GPU-77c1"]), ("0,-1,2", ["0"]), ("-1", []),
    ("MIG-3a1b/1/0", ["MIG-3a1b/1/0"]),
])
def test_visible_devices(text, entries):
    env = {} if text is None else {"CUDA_VISIBLE_DEVICES": text}
    assert visible_devices(env) == entries


def test_one_gpu_per_task_uses_index_zero():
    # srun --gpus-per-task=1: local rank 3 sees only its own GPU
    choice = select_device(None, {"SLURM_LOCALID": "3", "CUDA_VISIBLE_DEVICES": "3"})
    assert (choice.local_rank, choice.device, choice.visible, choice.physical) == (3, 0, 1, "3")


def test_all_gpus_visible_round_robin():
    env = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    got = [select_device(None, dict(env, OMPI_COMM_WORLD_LOCAL_RANK=str(r))).device for r in range(8)]
    assert got == [0, 1, 2, 3, 0, 1, 2, 3]
    assert select_device(None, {"SLURM_LOCALID": "5", "CUDA_VISIBLE_DEVICES": "4,6"}).physical == "6"


def test_device_count_when_cuda_visible_devices_unset():
    assert select_device(None, {"SLURM_LOCALID": "5"}, device_count=4).device == 1
    unknown = select_device(None, {"SLURM_LOCALID": "5"})
    assert unknown.device is None and unknown.visible is None
    none = select_device(None, {"SLURM_LOCALID": "0", "CUDA_VISIBLE_DEVICES": ""}, device_count=8)
    assert none.device is None and none.visible == 0


def test_layout_for_info():
    from mpi4py import MPI

    layout = rank_layout(MPI.COMM_WORLD, {"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert layout[0]["device"] == 1 and layout[0]["source"] == "SLURM_LOCALID"
    line = format_layout(layout)[0]
    assert line.startswith("rank 0 on ") and line.endswith(
        "local rank 1 (SLURM_LOCALID), GPU 1 of 2 (CUDA_VISIBLE_DEVICES entry 1)")
    assert format_layout([dict(layout[0], device=None, visible=0, physical=None)])[0].endswith("no GPU visible")



def test_format_layout_names_ranks_sharing_a_gpu():
    rows = [dict(rank=r, host=h, local_rank=lr, source="MPI_LOCALRANKID", visible=1, device=0, physical=None)
            for r, (h, lr) in enumerate([("a", 0), ("a", 1), ("b", 0), ("a", 2)])]
    lines = format_layout(rows)
    assert lines[0].endswith("GPU 0 of 1, shared with ranks 1, 3") and lines[1].endswith("shared with ranks 0, 3")
    assert lines[2].endswith("local rank 0 (MPI_LOCALRANKID), GPU 0 of 1")   # its own node's GPU
    rows = [dict(row, visible=2, physical=str(row["rank"] % 2)) for row in rows[:2]]
    assert not any("shared" in line for line in format_layout(rows))


def test_bind_device_without_cupy_is_a_no_op(monkeypatch):
    import sys

    from ozhpc.parallel.localrank import bind_device

    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    assert bind_device(None, {"SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "0,1"}) is None
