"""Child-process server around Tenstorrent's ttsim (`libttsim.so`), used by `runtime/ttsim_device.py`.

ttsim ends the whole process with `_Exit(1)` on any error, so it never runs inside the user's process: the parent
starts `python ttsim_server.py <libttsim.so> <socket fd>` and talks to it over a socketpair. The simulator's own
stdout/stderr (where its `[clock] ERROR: ...` message goes) is redirected by the parent to a file it reads back when the
child dies. Standalone on purpose (stdlib + ctypes only): it is run as a script, not imported.

This server is a thin RPC shim over the flat C API; all device knowledge (TLB windows, coordinates, MMIO rules) lives in
the parent. Wire format, little-endian: request header `<B3xQI` = (op, paddr_or_arg, n), then for op `W` n payload bytes.

| op | meaning | reply |
|---|---|---|
| `W` | `libttsim_pci_mem_wr_bytes(paddr, payload, n)` | none |
| `R` | `libttsim_pci_mem_rd_bytes(paddr, buf, n)` | n bytes |
| `C` | `libttsim_clock(n)` (paddr = repeat count, 0 means 1) | none |
| `P` | ping | 1 byte |
| `G` | `libttsim_pci_config_rd32(paddr, n)` (bus_device_function, offset) | 4 bytes |
| `Q` | `libttsim_exit()`, then exit(0) | 1 byte |

Writes and clocks are not acknowledged (they are pipelined); an error they cause surfaces as EOF at the next reply.
"""
from __future__ import annotations

import ctypes
import signal
import socket
import struct
import sys

HDR = struct.Struct("<B3xQI")


def _recv_exact(sock: socket.socket, view: memoryview) -> bool:
    got, n = 0, len(view)
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            return False
        got += k
    return True


def serve(lib_path: str, fd: int) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business; EOF on the socket ends us
    try:
        lib = ctypes.CDLL(lib_path)
        lib.libttsim_init     # the parent reports this line: the file is no ttsim library
    except (OSError, AttributeError) as e:
        print(f"ttsim_server: ERROR: not a ttsim library: {e}", flush=True)
        return 3
    u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
    lib.libttsim_init.argtypes, lib.libttsim_init.restype = [], None
    lib.libttsim_exit.argtypes, lib.libttsim_exit.restype = [], None
    lib.libttsim_clock.argtypes, lib.libttsim_clock.restype = [u32], None
    lib.libttsim_pci_mem_wr_bytes.argtypes, lib.libttsim_pci_mem_wr_bytes.restype = [u64, vp, u32], None
    lib.libttsim_pci_mem_rd_bytes.argtypes, lib.libttsim_pci_mem_rd_bytes.restype = [u64, vp, u32], None
    lib.libttsim_pci_config_rd32.argtypes, lib.libttsim_pci_config_rd32.restype = [u32, u32], u32
    wr, rd, clock = lib.libttsim_pci_mem_wr_bytes, lib.libttsim_pci_mem_rd_bytes, lib.libttsim_clock

    sock = socket.socket(fileno=fd)
    lib.libttsim_init()
    sock.sendall(b"I")  # ready

    hdr = bytearray(HDR.size)
    hview = memoryview(hdr)
    cap = 1 << 16
    buf = (ctypes.c_char * cap)()
    bview = memoryview(buf).cast("B")
    while True:
        if not _recv_exact(sock, hview):
            return 0  # parent went away
        op, a, n = HDR.unpack_from(hdr)
        if op in (0x57, 0x52) and n > cap:  # 'W' / 'R': grow the transfer buffer
            cap = 1 << (n - 1).bit_length()
            buf = (ctypes.c_char * cap)()
            bview = memoryview(buf).cast("B")
        if op == 0x57:    # W
            if not _recv_exact(sock, bview[:n]):
                return 0
            wr(a, buf, n)
        elif op == 0x52:  # R
            rd(a, buf, n)
            sock.sendall(bview[:n])
        elif op == 0x43:  # C
            for _ in range(max(a, 1)):
                clock(n)
        elif op == 0x50:  # P
            sock.sendall(b"P")
        elif op == 0x47:  # G
            sock.sendall(struct.pack("<I", lib.libttsim_pci_config_rd32(a, n)))
        elif op == 0x51:  # Q
            sys.stdout.flush()
            lib.libttsim_exit()
            sock.sendall(b"Q")
            return 0
        else:
            print(f"ttsim_server: bad op {op:#x}", flush=True)
            return 2


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1], int(sys.argv[2])))
