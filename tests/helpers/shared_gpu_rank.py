"""``python tests/helpers/shared_gpu_rank.py ARGS`` = ``ozhpc ARGS`` on ranks that all believe they run
the cutile engine on one and the same GPU, with NCCL usable and MPI not CUDA-aware
(tests/test_transport.py, under mpiexec). The GPU facts are injected here -- a NumPy engine
that says it is on a device, every rank's device identity the same PCI bus id -- so the
product code carries no test hook."""
import socket

from ozhpc import cli
from ozhpc.engines.numpy_engine import NumpyEngine
from ozhpc.parallel import localrank, transport_choice
from ozhpc.run import runner


class SharedGpuEngine(NumpyEngine):
    name = "cutile"
    on_device = True


runner._engine = lambda name: SharedGpuEngine()
runner._device_free = lambda engine: None
localrank.device_identity = lambda: {"host": socket.gethostname(), "bus_id": "0000:19:00.0", "index": 0}
transport_choice.nccl_available = lambda: None
transport_choice.mpi_cuda_support = lambda: False
cli.entry_point()
