"""Child process that hosts tt-umd's simulation device on ttsim, used by `runtime/umd_sim_device.py` (target umd-sim).

`python umd_sim_server.py <simulator .so path> <socket fd>`. The simulation is hosted by tt-umd itself
(`tt_umd.SimulationConnector`, serving each simulated chip on a socket in a fresh server directory), so the parent
attaches to it as a tt-umd client and drives it through the same `tt_umd.TTDevice` calls a card takes; ttsim's
`_Exit(1)` on an error ends this process, never the user's. What this script adds is the clock: a card runs on its
own, ttsim advances only when clocked (tt-umd clocks it once per read), so the parent asks for clocks here, and they
are run with `libttsim_clock` of the very library tt-umd loaded (same path, so the same loaded image).

The `.so` path is a simulator directory as tt-umd wants it (`soc_descriptor.yaml` beside the library), which the
parent prepares.

Wire format on the socket, little-endian. Ready: b"I", u32 length, the server directory (UTF-8). Requests: header
`<B3xQI` = (op, a, n):

| op | meaning | reply |
|---|---|---|
| `C` | `libttsim_clock(n)`, `a` times (0 means once) | b"C" |
| `P` | ping | b"P" |
| `Q` | close the simulation, exit | b"Q" |

Clocks are acknowledged: tt-umd's server thread enters the same library for the client's requests, and the parent
never has a clock and a tt-umd request in flight at once, so ttsim is never entered from two threads. Standalone on
purpose (stdlib and tt_umd): it is run as a script, not imported.
"""
from __future__ import annotations

import ctypes
import signal
import socket
import struct
import sys

import tt_umd

HDR = struct.Struct("<B3xQI")


def serve(sim_path: str, fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; EOF on the socket ends us
    sock = socket.socket(fileno=fd)
    options = tt_umd.SimulationConnectorOptions()
    options.simulator_directory = sim_path
    options.serve_over_sockets = True
    connection, devices, _ = tt_umd.SimulationConnector.discover(options)
    clock = ctypes.CDLL(sim_path).libttsim_clock
    clock.argtypes, clock.restype = [ctypes.c_uint32], None
    where = str(connection.server_directory).encode()
    sys.stdout.flush()
    sock.sendall(b"I" + struct.pack("<I", len(where)) + where)
    hdr = bytearray(HDR.size)
    while True:
        view, got = memoryview(hdr), 0
        while got < HDR.size:
            k = sock.recv_into(view[got:])
            if k == 0:
                return 0          # parent went away; tt-umd closes the simulation with `devices`
            got += k
        op, a, n = HDR.unpack_from(hdr)
        if op == 0x43:    # C
            for _ in range(max(a, 1)):
                clock(n)
            sock.sendall(b"C")
        elif op == 0x50:  # P
            sock.sendall(b"P")
        elif op == 0x51:  # Q
            devices.clear()       # tt-umd stops serving and shuts the simulator down with the last device
            sys.stdout.flush()
            sock.sendall(b"Q")
            return 0
        else:
            print(f"umd_sim_server: bad op {op:#x}", flush=True)
            return 2


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2])))
