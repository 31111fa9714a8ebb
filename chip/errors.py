"""The exceptions users and tests see. One base type, `TTError`, whose message says what to do."""


class TTError(RuntimeError):
    """Any error a user of the TT backend can act on (unsupported op/dtype, compiler missing, kernel too big, timeout)."""


class CompilerNotFound(TTError):
    pass


class KernelTooLarge(TTError):
    pass


class DeviceTimeout(TTError):
    pass


class UnsupportedOp(TTError, NotImplementedError):
    """An op, dtype or pattern the lowering does not handle yet. Never silently run elsewhere."""


class EmuError(TTError):
    """The emulated hardware hit behaviour the ISA documents as undefined (strict mode), or a fatal condition."""


class EmuUnimplemented(TTError, NotImplementedError):
    """An instruction or mode the emulator does not model yet. Raised by name, never guessed."""


class NotComputed(TTError):
    """A read of a buffer whose contents were never computed: the kernel that was to fill it failed (or did not run
    because another kernel of its schedule failed), or the device lost its memory. `failure` says which and why."""

    def __init__(self, msg: str, failure=None):
        super().__init__(msg)
        self.failure = failure


class DeviceOutOfMemory(TTError, MemoryError):
    """The device's DRAM has no free block large enough for a buffer."""


class TTWarning(UserWarning):
    """Something the TT backend worked around (a damaged cache entry rebuilt, a cache it cannot write)."""
