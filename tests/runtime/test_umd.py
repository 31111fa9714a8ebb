"""The card path (runtime/umd_device.py, runtime/hw_device.py) against tt-umd: the real package where it is installed,
the fake (tests/support/fake_tt_umd.py) otherwise, and the fake for what needs a card to open (a harvested column,
translation off, a card held by someone).

* every tt-umd failure surfaces as a TTError naming the operation, the NoC coordinate and tt-umd's message (real
  tt-umd exceptions, raised from its C++ test hooks, where installed); `core_state()` survives a failing read;
* the card lock is tt-umd's and tt-metal's named robust mutex `CHIP_IN_USE_<n>_PCIe`: a second process is refused
  with the holder named, a holder that dies frees it;
* opening checks NoC translation, takes the tile from the SoC descriptor (harvested columns skipped), sets the power
  state; the fake keeps the real package's names and parameter names (checked here when tt-umd is installed).
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

from tt_backend.chip import interleave, layout
from tt_backend.chip.errors import DeviceTimeout, TTError
from tt_backend.runtime import driver, targets
from tt_backend.runtime.hw_device import CardLock, HwDevice, lock_name
from tt_backend.runtime.umd_device import UmdError, UmdTimeout, UmdTransport

from tests.support import REPO_ROOT, fake_tt_umd, harness, programs

try:
    REAL_UMD = importlib.import_module("tt_umd")
except ImportError:          # tests comparing with the real package are marked needs_tt_umd
    REAL_UMD = None


def child_env() -> dict[str, str]:
    """The environment of a child process that imports the fake (tests.support.fake_tt_umd)."""
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


# ------------------------------------------------------------------------------------------- the fake stays in sync
# fake class -> the real class it stands for; constructors the real package does not offer from Python are exempt
FAKE_OF = {"TTDevice": "TTDevice", "SocDescriptor": "SocDescriptor", "PCIDevice": "PCIDevice",
           "_Info": "PciDeviceInfo", "RobustMutex": "RobustMutex", "CoreCoord": "CoreCoord", "tt_xy_pair": "tt_xy_pair"}
NOT_REAL = {("TTDevice", "__init__"), ("_Info", "__init__")}     # real ones come from TTDevice.create / enumeration


def _real_params(fn) -> list[list[str]]:
    """Parameter names of each overload of a nanobind function (from its signature text)."""
    out = []
    for sig, *_ in fn.__nb_signature__:
        params = sig[sig.index("(") + 1:sig.rindex(") ->")]
        out.append(re.findall(r"(?:^|, )(\w+)(?=[:,]| =|$)", params))
    return out


@pytest.mark.needs_tt_umd
def test_fake_has_the_real_names_and_parameters():
    for fake_name, real_name in FAKE_OF.items():
        fake_cls, real_cls = getattr(fake_tt_umd, fake_name), getattr(REAL_UMD, real_name)
        for meth, fn in vars(fake_cls).items():
            is_method = inspect.isfunction(fn) or isinstance(fn, staticmethod)
            if not is_method or (fake_name, meth) in NOT_REAL or meth.startswith("_") and meth != "__init__":
                continue
            assert hasattr(real_cls, meth), f"{real_name}.{meth} is not in tt-umd {REAL_UMD.__name__}"
            mine = list(inspect.signature(getattr(fake_cls, meth)).parameters)
            overloads = _real_params(getattr(real_cls, meth))
            assert any(real[:len(mine)] == mine for real in overloads), (real_name, meth, mine, overloads)
    for enum_name, members in (("ARCH", fake_tt_umd.ARCH), ("CoreType", fake_tt_umd.CoreType),
                               ("CoordSystem", fake_tt_umd.CoordSystem),
                               ("TTDevice.PowerState", fake_tt_umd.TTDevice.PowerState)):
        real = REAL_UMD
        for part in enum_name.split("."):
            real = getattr(real, part)
        assert {m.name: m.value for m in members}.items() <= {m.name: m.value for m in real}.items(), enum_name
    assert issubclass(REAL_UMD.error.DeviceTimeoutError, REAL_UMD.error.UmdBaseException)
    assert issubclass(REAL_UMD.SigbusError, Exception)


# ------------------------------------------------------------------------------------------- tt-umd errors -> TTError
class _Raising:
    """A TTDevice whose every method raises what `raise_it()` raises (the real tt-umd's C++ test hooks)."""

    def __init__(self, raise_it):
        self.raise_it = raise_it

    def __getattr__(self, name):
        def method(*a):
            self.raise_it()
        return method


REAL_FAILURES = [  # (tt-umd call that raises, the TTError type, what the message must say)
    ("error.raise_device_timeout_error_for_testing", UmdTimeout, "DeviceTimeoutError"),
    ("raise_sigbus_error_for_testing", UmdError, "SigbusError"),
]


@pytest.mark.needs_tt_umd
@pytest.mark.parametrize("hook,kind,name", REAL_FAILURES, ids=[f[2] for f in REAL_FAILURES])
def test_real_tt_umd_exceptions_become_tterror(hook, kind, name):
    fn = REAL_UMD
    for part in hook.split("."):
        fn = getattr(fn, part)
    t = UmdTransport(_Raising(fn), "hw", lambda budget: None)
    for call, op in ((lambda: t.noc_read((1, 2), 0x100, 64), "reading 64 bytes at 0x100"),
                     (lambda: t.noc_write32((1, 2), 0xFFB121B0, 7), "writing register 0xffb121b0"),
                     (lambda: t.set_soft_reset((1, 2), 0x47800), "setting the soft reset to 0x47800")):
        with pytest.raises(kind) as ei:
            call()
        e = ei.value
        assert isinstance(e, TTError) and e.op == op and e.xy == (1, 2) and e.umd_type == name
        assert f"hw: {op} at NoC (1, 2) failed in tt-umd ({name})" in str(e)
        assert not re.search(r"^\s*\d+\. ", str(e), re.M), "tt-umd's C++ backtrace belongs in __cause__ only"
        assert type(e.__cause__).__name__ == name
    assert issubclass(UmdTimeout, DeviceTimeout)


def test_fake_failures_become_tterror_with_what_to_do(card):
    d = card()
    fake_tt_umd.failing["noc_read"] = fake_tt_umd.DeviceTimeoutError(
        "Timeout waiting for the PCIe read\nLocation: tt_device.cpp:1\n 1. frame\n 2. frame")
    with pytest.raises(DeviceTimeout, match=r"reading 16 bytes at 0x20000 at NoC \(1, 2\) failed in tt-umd "
                                            r"\(DeviceTimeoutError\): Timeout waiting for the PCIe read") as ei:
        d.read_l1(0x20000, 16)
    assert "Location: tt_device.cpp:1" in str(ei.value) and "frame" not in str(ei.value)
    assert "reset the card (tt-smi -r)" in str(ei.value)
    fake_tt_umd.failing["noc_read"] = fake_tt_umd.SigbusError("SIGBUS in the TLB window")
    with pytest.raises(UmdError, match="(?s)SigbusError.*PCIe mapping faulted"):
        d.read_dram(0x1000, 8)
    fake_tt_umd.failing["noc_read"] = RuntimeError("std::runtime_error from the bindings")
    with pytest.raises(UmdError, match="RuntimeError"):
        d.read_l1(0, 4)


def test_core_state_survives_a_failing_read(card):
    d = card()
    fake_tt_umd.failing["noc_read32"] = fake_tt_umd.UmdBaseException("NOC read hung")
    state = d.core_state()
    assert set(state) == set(layout.CORES)
    assert all(s.startswith("unreadable: hw: reading register") and "NOC read hung" in s for s in state.values())


@pytest.mark.needs_program_cc
def test_a_launch_whose_reads_fail_reports_tterror_and_core_state(card):
    d = card()
    d.write_l1(0x20000, bytes(16))
    store_word = programs.compile_prog("device/store_word.c")
    fake_tt_umd.failing["noc_read"] = fake_tt_umd.DeviceTimeoutError("card stopped answering")
    with pytest.raises(TTError, match="card stopped answering"):
        driver.launch(d, {"brisc": store_word}, [0x20000, 41], timeout_s=5)
    del fake_tt_umd.failing["noc_read"]
    assert driver.launch(d, {"brisc": store_word}, [0x20000, 41]).cores["brisc"].error == 0


@pytest.mark.parametrize("method", ["create", "init_tt_device", "get_soc_descriptor", "get_noc_translation_enabled",
                                    "set_power_state"])
def test_every_failure_while_opening_is_tterror(card, method):
    fake_tt_umd.failing[method] = fake_tt_umd.UmdBaseException(f"{method} broke")
    with pytest.raises(TTError, match=f"{method} broke"):
        targets.make_device("hw")
    del fake_tt_umd.failing[method]
    card().close()                                  # the failed open let go of the lock


# ------------------------------------------------------------------------------------------- the card lock
UMD = REAL_UMD or fake_tt_umd        # the lock tests use the real robust mutex where tt-umd is installed
HOLDER = textwrap.dedent("""
    import sys
    if {fake}:
        from tests.support import fake_tt_umd as tt_umd
        tt_umd.LOCK_DIR = {lock_dir!r}
    else:
        import tt_umd
    m = tt_umd.RobustMutex({name!r})     # what tt-metal (tt-umd's LocalChip::start_device) takes for the card
    m.lock()
    print("holding", flush=True)
    sys.stdin.read()
    m.unlock()
""")


@pytest.fixture
def lock_number(tmp_path, monkeypatch):
    """A card number no real card has, private to this test run; its lock file is removed afterwards."""
    n = 90_000 + os.getpid() % 10_000
    monkeypatch.setattr(fake_tt_umd, "LOCK_DIR", str(tmp_path))
    yield n
    if REAL_UMD is not None:
        path = f"/dev/shm/{REAL_UMD.RobustMutex.SHM_FILE_PREFIX}{lock_name(n)}"
        if os.path.exists(path):
            os.remove(path)


def _hold_in_another_process(n: int) -> subprocess.Popen:
    script = os.path.join(fake_tt_umd.LOCK_DIR, "holder.py")
    with open(script, "w") as f:
        f.write(HOLDER.format(fake=REAL_UMD is None, lock_dir=fake_tt_umd.LOCK_DIR, name=lock_name(n)))
    p = subprocess.Popen([sys.executable, script, "tt-metal-stand-in"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=child_env())
    assert p.stdout.readline().strip() == "holding"
    return p


def test_a_card_held_by_another_process_is_refused_naming_it(lock_number):
    holder = _hold_in_another_process(lock_number)
    try:
        with pytest.raises(TTError) as ei:
            CardLock(UMD, lock_number)
        msg = str(ei.value)
        assert f"device {lock_number} is in use: pid {holder.pid} (" in msg and "tt-metal-stand-in" in msg
        assert f"CHIP_IN_USE_{lock_number}_PCIe" in msg and "pick another card" in msg
    finally:
        holder.communicate("")                     # lets go of the lock and exits
    lock = CardLock(UMD, lock_number)              # free once the holder let go
    lock.release()


def test_a_holder_that_dies_frees_the_card(lock_number):
    holder = _hold_in_another_process(lock_number)
    with pytest.raises(TTError, match="is in use"):
        CardLock(UMD, lock_number)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    lock = CardLock(UMD, lock_number)              # robust mutex: the dead owner's hold is recovered
    lock.release()


def test_our_open_device_keeps_a_second_process_out(card):
    d = card()
    code = textwrap.dedent(f"""
        import sys
        from tests.support import fake_tt_umd
        fake_tt_umd.reset(); fake_tt_umd.LOCK_DIR = {fake_tt_umd.LOCK_DIR!r}
        sys.modules["tt_umd"] = fake_tt_umd
        from tt_backend.runtime.hw_device import HwDevice
        try:
            HwDevice(0)
        except Exception as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=child_env())
    assert out.stdout.startswith(f"TTError Tenstorrent device 0 is in use: pid {os.getpid()} "), out.stdout + out.stderr
    d.close()
    card().close()                                 # and ours is free again once closed


# ------------------------------------------------------------------------------------------- what opening checks
def test_open_sets_power_and_reports_the_survey(card):
    d = card()
    assert fake_tt_umd.calls.index("set_power_state:BUSY") < fake_tt_umd.calls.index("noc_read32")
    s = d.survey
    assert s.translation and d.tile_xy == s.tile_xy == (1, 2) and s.tile_noc0 == (1, 2) and s.harvested_tensix == ()
    assert s.dram_noc0 == tuple((9 if x == 18 else 0, y - 12) for x, y in interleave.BANK_XYS)
    assert s.dram_noc0[4] == fake_tt_umd.DRAM_NOC0
    d.close()
    assert fake_tt_umd.calls[-1] == "set_power_state:IDLE"


@pytest.mark.needs_program_cc
def test_harvested_columns_are_skipped(card):
    fake_tt_umd.harvested_columns.update({1, 2})
    d = card()
    assert d.survey.tile_noc0 == (3, 2) and d.tile_xy == (1, 2)          # translated (1, 2) is the first healthy one
    assert sorted({x for x, _ in d.survey.harvested_tensix}) == [1, 2]
    assert "harvested Tensix columns: 1, 2" in d.survey.describe()
    d.write_l1(0x20000, bytes(16))
    store_word = programs.compile_prog("device/store_word.c")
    assert driver.launch(d, {"brisc": store_word}, [0x20000, 41]).cores["brisc"].error == 0


def test_translation_off_is_refused(card):
    fake_tt_umd.translation = False
    with pytest.raises(TTError, match=r"NoC translation is off on this card .* DRAM banks by their translated"):
        card()
    status = targets.probe("hw")                     # info says why the card cannot be used
    assert not status.available and "NoC translation is off" in status.detail


def test_a_harvested_dram_bank_is_refused(card):
    fake_tt_umd.harvested_dram = True
    with pytest.raises(TTError, match=r"DRAM \(18, 13\) is NOC0 \(9, 1\), a harvested bank"):
        card()


@pytest.mark.needs_program_cc
def test_a_tile_running_someone_elses_code_is_refused_and_left_idle(card):
    d = card(retire_timeout_s=0.2)
    harness.release_brisc(d, programs.compile_prog("device/spin.c"), 9)          # a core that never reports done
    d.close()
    fake_tt_umd.calls.clear()
    with pytest.raises(TTError, match="not a finished tt_backend kernel"):
        card()
    power = [c for c in fake_tt_umd.calls if c.startswith("set_power_state")]
    assert power == ["set_power_state:BUSY", "set_power_state:IDLE"] and fake_tt_umd.calls[-1] == power[-1]
    assert not any(c.startswith("set_risc_reset_state") for c in fake_tt_umd.calls)    # its cores were not touched


def test_umd_sim_is_a_target_of_its_own_and_hw_stays_a_card():
    from tt_backend import knobs
    lib = {"TT_SIMULATOR": "/x/libttsim.so"}
    assert knobs.backend(lib) == "ttsim" and knobs.backend({**lib, "TT_BACKEND": "umd-sim"}) == "umd-sim"
    assert knobs.backend({**lib, "TT_BACKEND": "hw"}) == "hw" and knobs.parse_device("TT:umd-sim") == ("umd-sim", None)
    with pytest.raises(TTError, match="one chip"):
        targets.make_device("umd-sim", device_number=1, lib_path="/x/libttsim.so")
