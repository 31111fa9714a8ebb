"""A simulator server script in a child process: how the `ttsim` and `umd-sim` targets keep ttsim out of the user's
process.

ttsim reports any error by `_Exit(1)` of the process it runs in, so it never runs in the user's process: the parent
starts `python <script> <args...> <socket fd>`, talks to it over a socketpair, and sends the child's stdout/stderr
(where ttsim prints its `[clock] ERROR: <Category>: <function>: <detail>` line) to a file it reads back when the child
dies. `SimChild.died()` turns that into `TtsimDied` (a `TTError`) carrying the ERROR line and the last output lines.
The wire protocol on the socket is each script's own; the only shared rule is that a ready child sends b"I" first.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

from tt_backend.chip.errors import TTError


CLOCK_CALL_MAX = 0xFFFFFFFF          # libttsim_clock takes a u32 count


def clock_calls(budget: int) -> list[tuple[int, int]]:
    """`budget` clocks as (repeat, count) pairs of libttsim_clock calls, count <= CLOCK_CALL_MAX."""
    reps, rest = divmod(max(budget, 0), CLOCK_CALL_MAX)
    return [(r, n) for r, n in ((reps, CLOCK_CALL_MAX), (1, rest)) if r and n]


class TtsimDied(TTError):
    """The ttsim child process exited (ttsim reports any error by `_Exit(1)`). `sim_message` is its ERROR line."""

    def __init__(self, msg: str, sim_message: str = "", output: list[str] | None = None, returncode: int | None = None):
        super().__init__(msg)
        self.sim_message = sim_message
        self.output = output or []
        self.returncode = returncode


class SimChild:
    """`python script *args <fd>` with a socketpair to it (`sock`) and its output in a log file."""

    def __init__(self, script: str, args: list[str], what: str, start_timeout: float):
        self.what = what                      # "ttsim", "tt-umd's simulation host": for messages
        self.dead: TtsimDied | None = None
        self.proc: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self._log = tempfile.TemporaryFile(prefix="ttsim-", suffix=".log")
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.proc = subprocess.Popen([sys.executable, script, *args, str(child.fileno())],
                                         pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=subprocess.STDOUT, close_fds=True)
        finally:
            child.close()
        self.sock = parent
        parent.settimeout(start_timeout)
        try:
            ready = parent.recv(1)
        except OSError:
            ready = b""
        parent.settimeout(None)
        if ready != b"I":
            raise self.died(f"starting {what}")

    @property
    def alive(self) -> bool:
        return self.dead is None and self.sock is not None

    def check(self) -> None:
        """Raise if the child is known dead or was closed."""
        if self.dead is not None:
            raise TtsimDied(f"{self.what} is dead (earlier error: {self.dead.sim_message or self.dead})",
                            self.dead.sim_message, self.dead.output, self.dead.returncode)
        if self.sock is None:
            raise TTError(f"{self.what} is closed")

    def send(self, data, doing: str) -> None:
        self.check()
        try:
            self.sock.sendall(data)
        except OSError:
            raise self.died(doing) from None
        except BaseException:
            self.abandon(doing)
            raise

    def recv(self, n: int, doing: str) -> bytes:
        """Exactly n bytes from the child, or TtsimDied."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        try:
            while got < n:
                k = self.sock.recv_into(view[got:], n - got)
                if k == 0:
                    break
                got += k
        except OSError:
            got = -1
        except BaseException:
            self.abandon(doing)
            raise
        if got != n:
            raise self.died(doing)
        return bytes(buf)

    def abandon(self, doing: str) -> None:
        """An exception (Ctrl-C) in the middle of a message leaves the stream between two messages: no later reply
        could be trusted to belong to its request, so the child is stopped and counts as dead."""
        self.dead = TtsimDied(f"{self.what} connection abandoned: interrupted while {doing}", "interrupted")
        self._close_sock()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def died(self, doing: str) -> TtsimDied:
        """The child is gone (EOF, broken pipe, or a peer of it saw it go): collect its output; the caller raises."""
        rc = None
        if self.proc is not None:
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
        lines: list[str] = []
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - 65536))
            lines = self._log.read().decode(errors="replace").splitlines()[-20:]
        except (OSError, ValueError):
            pass
        errs = [ln for ln in lines if "ERROR" in ln]
        sim_msg = errs[-1].strip() if errs else ""
        why = sim_msg or (f"killed by signal {-rc}" if rc is not None and rc < 0 else f"exit code {rc}")
        tail = "\n".join("  | " + ln for ln in lines[-8:])
        self.dead = TtsimDied(f"{self.what} died while {doing}: {why}\n  last simulator output:\n{tail}\n"
                              "  (the device is unusable now: create a new device or call restart())",
                              sim_msg, lines, rc)
        self._close_sock()
        return self.dead

    def _close_sock(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def close(self, quit_request: bytes) -> int | None:
        """Ask the child to quit (`quit_request`, answered by one byte), reap it (idempotent); its exit code (None
        when it was reaped before)."""
        rc = self.dead.returncode if self.dead is not None else None
        if self.sock is not None and self.dead is None:
            try:
                self.sock.sendall(quit_request)
                self.sock.settimeout(5)
                self.sock.recv(1)
            except OSError:
                pass
        self._close_sock()
        if self.proc is not None:
            try:
                rc = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = self.proc.wait()
            self.proc = None
        try:
            self._log.close()
        except (OSError, AttributeError):
            pass
        return rc
