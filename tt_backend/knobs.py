"""The user's knobs (environment variables), read where they are used so a changed environment takes effect.

Stdlib only: `map_device_env` runs at interpreter start from the .pth hook, before tinygrad exists.

| variable | meaning |
|---|---|
| `DEVICE=TT` | this project's spelling; mapped to tinygrad's `DEV=TT` before tinygrad reads its context |
| `DEV=TT[:...]` | tinygrad's own spelling, honoured as is |
| `TT_BACKEND` | `emu` (default), `ttsim`, `umd-sim`, `hw`; `TT_SIMULATOR` alone means `ttsim`; `TT:<target>` overrides |
| `TT_DUMP=dir` | write every kernel's sources, ELFs, disassembly and placement report under dir |
| `TT_ERR_BUDGET` | relative-error budget vs float32 (lowering/placement/; unset: the float32-faithful placement) |
| `TT_PLACE` | pin nodes for tuning: `kernel_glob:n5=FPU:HiFi2,n3=SFPU;...` (node ids as report.json shows them) |
| `TT_CHECK=1` | run the float32 reference of each kernel on its real inputs; measured error into report.json |
| `TT_BUDGET_SAMPLED=1` | under TT_ERR_BUDGET, let FPU sums and matmuls in on their error predicted on sample data alone: faster, but the budget then holds for data like the samples, not for all data (a sum can cancel; default 0: they stay on the SFPU, lowering/placement/guarantee.py) |
| `TT_SAMPLE_DIST` | sample distributions placement predicts with (comma list of normal, uniform, positive; default all) |
| `TT_CORES` | at most this many Tensix cores per kernel (default: the count the cost model predicts fastest, up to the target's grid) |
| `TT_TIMEOUT` | seconds one kernel launch may take before the driver stops the cores (default 600) |
| `TT_SFPU_MACRO=1` | SFPLOADMACRO schedules on emu and hw (default 0: macro-free everywhere): elementwise row steps whose last op fits run it and their store through SFPLOADMACRO, lowering/codegen/sfpu_macro.py; the emulator runs those on its per-instruction path (slower on the host), and no card has run them yet |
| `TT_SHARED_PROGRAMS` | 1 (default): elementwise kernels run the shared reader, writer, unpacker and packer programs where they fit, built once per compiler (lowering/families/shared_programs.py); 0: every kernel gets its own rendered ones (the reference the programs are tested against) |
| `TT_CACHE_DIR` | the compile cache (default ~/.cache/tt_backend; `python -m tt_backend cache --info/--clear`) |
| `TT_PREDICTIONS=file` | append one JSON line per emulated launch: kernel, family, predicted and emulated cycles, cores (tt_backend/predictions.py; `python -m tt_backend bench predictions`) |

Every knob is checked when the TT device opens (`validate`): a typo is an error naming the knob and what it accepts,
never a silent default.
"""
from __future__ import annotations

import os

# runs at interpreter start (the .pth hook): nothing but the stdlib and the leaf's error types (stdlib only too)
from tt_backend.chip.errors import TTError

BACKENDS = ("emu", "ttsim", "umd-sim", "hw")
_BOOLS = {"": False, "0": False, "false": False, "no": False, "off": False,
          "1": True, "true": True, "yes": True, "on": True}


def _flag(environ, name: str, default: str, expected: str) -> bool:
    """A yes/no knob (`default` when unset); anything but the _BOOLS spellings is an error saying what is `expected`."""
    v = environ.get(name, default).strip().lower()
    if v not in _BOOLS:
        raise TTError(f"{name}={v!r}: expected {expected}")
    return _BOOLS[v]


def _device_of(target: str) -> str:
    """The device part of a tinygrad DEV string: 'TT' of 'TT', 'tt:XYZ', 'iface+TT:R:A' or 'TT;CPU' (first target)."""
    first = target.split(";")[0]
    first = first.split("+")[-1]
    return first.split(":")[0].strip().upper()


def device_env_conflict(environ=os.environ) -> str | None:
    """A message when DEVICE and DEV are both set, one of them names TT, and they disagree; else None."""
    device, dev = environ.get("DEVICE", "").strip(), environ.get("DEV", "").strip()
    if not device or not dev:
        return None
    a, b = _device_of(device), _device_of(dev)
    if a != b and "TT" in (a, b):
        return (f"DEVICE={device} and DEV={dev} disagree: the TT backend reads DEVICE=TT as tinygrad's DEV=TT. "
                f"Unset one of them, or set both to the same device.")
    return None


def map_device_env(environ=os.environ) -> str | None:
    """DEVICE=TT with DEV unset -> DEV=TT (tinygrad ignores DEVICE). Returns the conflict message, if any, so the
    caller decides when to raise it (at interpreter start a raise would only be printed by site.py)."""
    device = environ.get("DEVICE", "").strip()
    if device and _device_of(device) == "TT" and not environ.get("DEV", "").strip():
        environ["DEV"] = device          # the whole target string: DEVICE=TT:R:A means DEV=TT:R:A
        return None
    return device_env_conflict(environ)


def backend(environ=os.environ) -> str:
    """The execution target. Unknown names are an error, never a silent default."""
    name = environ.get("TT_BACKEND", "").strip().lower()
    if not name:
        name = "ttsim" if environ.get("TT_SIMULATOR") else "emu"
    if name not in BACKENDS:
        raise TTError(f"TT_BACKEND={name!r} is not one of {', '.join(BACKENDS)}")
    return name


def parse_device(device: str) -> tuple[str | None, int | None]:
    """A tinygrad device string's target and chip number: 'TT' -> (None, None) (the target follows TT_BACKEND),
    'TT:2' -> (None, 2), 'TT:ttsim' -> ('ttsim', None), 'TT:ttsim:2' -> ('ttsim', 2). Each chip number is its own chip
    (a card's number on hw; a separate emulator or ttsim instance otherwise). Anything else is an error."""
    parts = [p.strip().lower() for p in device.split(":")[1:]]
    target = parts.pop(0) if parts and parts[0] in BACKENDS else None
    if len(parts) > 1 or (parts and not parts[0].isdigit()):
        raise TTError(f"device {device!r}: expected TT, TT:<n>, TT:<target> or TT:<target>:<n> with a target of "
                      f"{', '.join(BACKENDS)} and a chip number n")
    return target, int(parts[0]) if parts else None


def check(environ=os.environ) -> bool:
    return _flag(environ, "TT_CHECK", "", "1 (measure each kernel's error against float32) or 0")


def budget_sampled(environ=os.environ) -> bool:
    return _flag(environ, "TT_BUDGET_SAMPLED", "", "1 (FPU sums and matmuls may be placed on their error predicted "
                 "on sample data, no bound for all data) or 0")


def sfpu_macro(environ=os.environ) -> bool:
    """Whether the targets that implement SFPLOADMACRO (emu, hw) get the SFPLOADMACRO schedules (default: no). On
    request only: the emulator runs SFPLOADMACRO work on its per-instruction path (its batched and C SFPU paths do not
    take it), which made a 512x512 a*b+a through tinygrad 7.5x slower on the host for about 12 % fewer emulated cycles,
    and no card has run the schedules yet (docs/performance.md §8.7)."""
    return _flag(environ, "TT_SFPU_MACRO", "", "1 (SFPLOADMACRO schedules where the target implements SFPLOADMACRO) "
                 "or 0 (macro-free schedules everywhere, the default)")


def l1_resident(environ=os.environ) -> bool:
    """Whether each launch runs its reader to the end before the compute cores and the writer start (the compute part
    measured L1 to L1: runtime/driver.py, docs/performance.md §8.5)."""
    return _flag(environ, "TT_L1_RESIDENT", "", "1 (each launch's inputs resident in L1 before its compute starts) "
                 "or 0 (streamed, the default)")


def shared_programs(environ=os.environ) -> bool:
    """Whether elementwise kernels run the programs shared by kernels where they fit (default: yes)."""
    return _flag(environ, "TT_SHARED_PROGRAMS", "1", "1 (the shared reader, writer, unpacker and packer programs "
                 "where they fit, the default) or 0 (every kernel's own)")


def place_spec(environ=os.environ) -> str | None:
    return environ.get("TT_PLACE", "").strip() or None


def dump_dir(environ=os.environ) -> str | None:
    d = environ.get("TT_DUMP") or None
    if d is not None and os.path.exists(d) and not os.path.isdir(d):
        raise TTError(f"TT_DUMP={d!r} is a file; it must name a directory (created if missing)")
    return d


def predictions_file(environ=os.environ) -> str | None:
    f = environ.get("TT_PREDICTIONS") or None
    if f is not None and os.path.isdir(f):
        raise TTError(f"TT_PREDICTIONS={f!r} is a directory; it must name a file (one JSON line per launch is appended)")
    return f


def err_budget(environ=os.environ) -> float | None:
    v = environ.get("TT_ERR_BUDGET", "").strip()
    if not v:
        return None
    try:
        b = float(v)
    except ValueError:
        b = -1.0
    if not 0 < b < float("inf"):
        raise TTError(f"TT_ERR_BUDGET={v!r}: expected a positive relative error such as 1e-3")
    return b


def cores(environ=os.environ) -> int | None:
    v = environ.get("TT_CORES", "").strip()
    if not v:
        return None
    if not v.isdigit() or int(v) < 1:
        raise TTError(f"TT_CORES={v!r}: expected a positive integer")
    return int(v)


def timeout_s(environ=os.environ) -> float:
    """Seconds a kernel may run before the driver stops it (the emulator is slow: generous default)."""
    v = environ.get("TT_TIMEOUT", "").strip()
    if not v:
        return 600.0
    try:
        t = float(v)
    except ValueError:
        t = -1.0
    if not 0 < t < float("inf"):
        raise TTError(f"TT_TIMEOUT={v!r}: expected a positive number of seconds such as 600")
    return t


def validate(environ=os.environ) -> None:
    """Parse every knob once (the TT device calls this when it opens)."""
    for knob in (backend, err_budget, budget_sampled, cores, timeout_s, check, dump_dir, predictions_file, sfpu_macro,
                 l1_resident, shared_programs):
        knob(environ)
