"""`UmdSimDevice` (target `umd-sim`): the card path on ttsim, through the real tt-umd.

A child process (`runtime/umd_sim_server.py`) hosts tt-umd's simulation device on the ttsim library `TT_SIMULATOR`
names, and serves it with tt-umd's own `SimulationConnector`; this process attaches to it as a tt-umd client. Every
NoC access, register access and soft reset then goes through a `tt_umd.TTDevice`, the same calls `HwDevice` makes on a
card, under the same `UmdDevice` (SoC descriptor survey, power state, tile claim, retire by asking, tt-umd errors as
TTError). Only two things differ from a card: the chip runs when clocked (`advance` asks the child to clock ttsim, as
the card's own clock would run it), and there is no card lock (the simulated chip is private to this device).

When ttsim stops on an error it ends the child, and the request in progress fails carrying ttsim's ERROR line
(`sim_message`) and the child's last output: a tt-umd call as `UmdError` ("because the simulator died"), a clock
request as `TtsimDied`, as on the `ttsim` target. The dead device refuses further use; `restart()` (or a new device)
gives a fresh simulator.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import weakref

from tt_backend.chip.errors import TTError

from .sim_child import SimChild, TtsimDied, clock_calls
from .ttsim_device import default_lib_path
from .umd_device import UmdDevice, import_umd, umd_error

_HDR = struct.Struct("<B3xQI")
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "umd_sim_server.py")


def simulator_directory(umd, lib_path: str) -> tuple[str, str | None]:
    """(the simulator path to give tt-umd, a temporary directory to remove afterwards or None).

    tt-umd reads a simulator's SoC descriptor from `soc_descriptor.yaml` beside the `.so`. When there is none, the
    simulator directory is made in a temporary directory: a link to the library, and tt-umd's built-in Blackhole
    descriptor (`SocArchDescriptor(ARCH.BLACKHOLE)`, the one it uses for a card) written in the descriptor's format
    (JSON, which YAML parsers read)."""
    if os.path.isfile(os.path.join(os.path.dirname(lib_path), "soc_descriptor.yaml")):
        return lib_path, None
    arch = umd.SocArchDescriptor(umd.ARCH.BLACKHOLE)

    def cores(cs):
        return [f"{c.x}-{c.y}" for c in cs]
    desc = {"arch_name": str(arch.arch), "grid": {"x_size": arch.grid_size.x, "y_size": arch.grid_size.y},
            "functional_workers": cores(arch.tensix_cores), "dram": [cores(ports) for ports in arch.dram_cores],
            "pcie": cores(arch.pcie_cores), "eth": cores(arch.eth_cores), "arc": cores(arch.firmware_cores),
            "router_only": cores(arch.router_cores), "l2cpu": cores(arch.l2cpu_cores),
            "security": cores(arch.security_cores), "noc0_x_to_noc1_x": list(arch.noc0_x_to_noc1_x),
            "noc0_y_to_noc1_y": list(arch.noc0_y_to_noc1_y), "worker_l1_size": arch.worker_l1_size,
            "eth_l1_size": arch.eth_l1_size, "dram_bank_size": arch.dram_bank_size}
    tmp = tempfile.mkdtemp(prefix="tt_backend-umd-sim-")
    with open(os.path.join(tmp, "soc_descriptor.yaml"), "w") as f:
        json.dump(desc, f)
    os.symlink(lib_path, os.path.join(tmp, "libttsim.so"))
    return os.path.join(tmp, "libttsim.so"), tmp


class SimHost:
    """The child process hosting the simulation: where it serves, and its clock."""

    def __init__(self, umd, lib_path: str, start_timeout: float):
        self.umd = umd
        sim_path, tmp = simulator_directory(umd, lib_path)
        # removed on close, or at exit for a device never closed (tinygrad keeps its devices until then)
        self._remove_tmp = weakref.finalize(self, shutil.rmtree, tmp, True) if tmp else lambda: None
        self.clocks = 0
        try:
            self.child = SimChild(_SERVER, [sim_path], "tt-umd's simulation host (ttsim)", start_timeout)
            n = struct.unpack("<I", self.child.recv(4, "starting"))[0]
            self.server_directory = self.child.recv(n, "starting").decode()
        except BaseException:
            self._remove_tmp()
            raise

    def _request(self, op: int, a: int, n: int, doing: str) -> None:
        self.child.send(_HDR.pack(op, a, n), doing)
        self.child.recv(1, doing)

    def clock(self, budget: int) -> None:
        """Run the simulated chip `budget` clocks; returns when they ran (see umd_sim_server.py: never concurrent with
        a tt-umd request)."""
        for reps, n in clock_calls(budget):
            self._request(0x43, reps, n, f"clocking {budget}")
        self.clocks += max(budget, 0)

    def death(self, op: str) -> TtsimDied | None:
        """Why tt-umd call `op` failed, if the host is gone: its death (ttsim's ERROR line); None while it answers."""
        if self.child.alive:
            try:
                self._request(0x50, 0, 0, op)
            except TtsimDied:
                pass
        return self.child.dead

    @property
    def alive(self) -> bool:
        return self.child.alive

    def close(self) -> None:
        rc = self.child.close(_HDR.pack(0x51, 0, 0))
        self._remove_tmp()
        if rc:       # a host that died (ttsim's _Exit) left its server directory: tt-umd clears dead hosts' ones
            self.umd.SimulationConnector.prune_dead_servers()


def attach(umd, server_directory: str):
    """The tt_umd.TTDevice of the chip a simulation host serves in `server_directory` (as a tt-umd client)."""
    try:
        options = umd.SimulationConnectorOptions()
        options.simulator_directory = server_directory
        _, devices, _ = umd.SimulationConnector.discover(options)
    except Exception as e:
        raise umd_error("umd-sim", f"attaching to the simulation served in {server_directory}", None, e) from e
    if len(devices) != 1:
        raise TTError(f"umd-sim: the simulation host serves {len(devices)} chips, expected one (a single-chip "
                      "libttsim.so)")
    return next(iter(devices.values()))


class UmdSimDevice(UmdDevice):
    """The Device protocol on tt-umd's simulation device over ttsim (see the module doc)."""

    def __init__(self, lib_path: str | None = None, *, start_timeout: float = 30.0, retire_timeout_s: float = 5.0):
        lib_path = lib_path or default_lib_path()
        if not lib_path or not os.path.isfile(lib_path):
            raise TTError(f"ttsim library not found ({lib_path!r}): TT_BACKEND=umd-sim runs tt-umd's simulation device "
                          "on ttsim; build tenstorrent/ttsim (./make.py src/_out/release_bh/libttsim.so) and set "
                          "TT_SIMULATOR to its path")
        self.lib_path = os.path.abspath(lib_path)
        self.start_timeout = start_timeout
        self.retire_timeout_s = retire_timeout_s
        self._open()

    def _open(self) -> None:
        umd = import_umd()
        self.host = SimHost(umd, self.lib_path, self.start_timeout)
        try:
            super().__init__(umd, attach(umd, self.host.server_directory), name="umd-sim", simulated=True,
                             advance=self.host.clock, cause_of_failure=self.host.death,
                             retire_timeout_s=self.retire_timeout_s)
        except BaseException:
            self.host.close()
            raise

    def chip_alive(self) -> bool:
        return self.host.alive

    @property
    def alive(self) -> bool:
        return self.host.alive

    @property
    def clocks(self) -> int:
        return self.host.clocks

    def restart(self) -> None:
        """Drop this simulation (dead or alive) and start a fresh one (all state lost)."""
        self.close()
        self._open()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.host.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
