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
