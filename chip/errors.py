"""The exceptions users and tests see. One base type, `TTError`, whose message says what to do.

The emulator's errors (`EmuError` and its categories) follow ttsim's error taxonomy (with tt-isa-documentation's
Glossary): each says whether the program or the emulator is at fault. Raise the precise category; catch `EmuError`
for all of them."""


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
    """The emulator stopped the program. The common base of the categories below; raise one of them."""


class EmuUndefined(EmuError):
    """Undefined behaviour (ttsim: UndefinedBehavior, UnpredictableValueUsed): the program did something the ISA
    documentation leaves undefined - an undefined mode or encoding, an out-of-range index or address, a read of state
    nobody wrote, a hazard the hardware does not interlock. Silicon may do anything; the program must change."""


class EmuUnspecified(EmuError):
    """Unspecified behaviour (ttsim: NonContractualBehavior, MissingSpecification): the program relies on behaviour
    the documentation declares non-contractual or does not pin down - reserved bits set, a misaligned access, an
    operand or ownership rule ttsim enforces - so no model (ttsim included) can say what silicon does. Use the
    documented form instead."""


class EmuDeadlock(EmuError):
    """The program waits forever: every core and thread is blocked on something nobody can provide (silicon would
    hang); reported instead of spinning."""


class EmuUnimplemented(EmuError, NotImplementedError):
    """Defined behaviour the emulator does not model (yet) (ttsim: UnimplementedFunctionality). Raised by name, never
    guessed."""


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
