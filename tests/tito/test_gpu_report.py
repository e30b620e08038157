"""`tito gpu-report`: without a GPU it says so and invents no figure; its measuring code runs
(under numba's CUDA simulator, at tiny sizes) and fills in every row it prints."""
import pytest

pytestmark = [pytest.mark.timeout(600), pytest.mark.command]

ROWS = ("copy host to device", "copy device to host", "map_kernel EXP", "elementwise(EXP)", "block_reduce_kernel SUM",
        "matmul_naive_kernel", "matmul_tiled_kernel", "MLP training step on cpu", "MLP training step on cuda")


def test_gpu_report_says_when_there_is_no_gpu_and_measures_each_kernel_when_it_can(course):
    # no device visible, and the simulator asked for by the environment: the report must not measure it
    out = course.tito("gpu-report", CUDA_VISIBLE_DEVICES="", NUMBA_ENABLE_CUDASIM="1", timeout=550)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "no NVIDIA GPU" in out.stdout and " ms " not in out.stdout, out.stdout

    out = course.tito("gpu-report", "--simulator", timeout=550)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "simulator" in out.stdout.splitlines()[0], out.stdout
    for name in ROWS:
        row = [line for line in out.stdout.splitlines() if line.strip().startswith(name)]
        assert len(row) == 1 and " ms" in row[0], f"{name}: {row or out.stdout}"
