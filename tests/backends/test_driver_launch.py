"""The driver launch path's argument packing, checked on a CPU: cuLaunchKernel is replaced
by a function that reads the parameter block the way the driver would (an array of
pointers, one per parameter, each to that parameter's bytes)."""

from __future__ import annotations

import ctypes
import struct
import threading

import pytest

from portkit.backends.twin import driver_launch


@pytest.fixture
def launches(monkeypatch):
    from cuda.bindings import driver

    seen = []

    def fake_launch(function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        pointers = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
        seen.append(
            {
                "function": int(function),
                "grid": (gx, gy, gz),
                "block": (bx, by, bz),
                "shared": shared,
                "stream": stream,
                "slots": [ctypes.string_at(pointers[i], 8) for i in range(4)],
            }
        )
        return (driver.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(driver, "cuLaunchKernel", fake_launch)
    return seen


def test_parameters_reach_the_driver_as_the_kernel_reads_them(launches) -> None:
    kernel = driver_launch.DriverKernel(0x1234, ["pointer", "float", "int", "long long"])
    kernel.launch((3, 1, 1), (256, 1, 1), 64, 7, [0xDEADBEEF00, 1.5, -2, 2**40])
    (launch,) = launches
    assert launch["function"] == 0x1234
    assert (launch["grid"], launch["block"], launch["shared"], launch["stream"]) == (
        (3, 1, 1),
        (256, 1, 1),
        64,
        7,
    )
    slots = launch["slots"]
    assert struct.unpack("=Q", slots[0])[0] == 0xDEADBEEF00
    assert struct.unpack("=f", slots[1][:4])[0] == 1.5
    assert struct.unpack("=i", slots[2][:4])[0] == -2
    assert struct.unpack("=q", slots[3])[0] == 2**40


def test_values_that_do_not_fit_raise_before_the_launch(launches) -> None:
    kernel = driver_launch.DriverKernel(1, ["int", "int", "int", "int"])
    with pytest.raises(struct.error):
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [2**40, 0, 0, 0])
    with pytest.raises(struct.error):
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [1.5, 0, 0, 0])
    assert launches == []


def test_each_thread_packs_into_its_own_block(launches) -> None:
    kernel = driver_launch.DriverKernel(1, ["int", "int", "int", "int"])
    addresses = []

    def run() -> None:
        addresses.append(kernel._buffers.address)
        kernel.launch((1, 1, 1), (1, 1, 1), 0, 0, [1, 2, 3, 4])

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    run()
    assert len(set(addresses)) == 3 and len(launches) == 3
