#!/usr/bin/env bash
# Install everything the project needs on a fresh Debian machine: a RISC-V cross compiler and the Python package.
set -euo pipefail
cd "$(dirname "$0")/.."
# A RISC-V cross compiler for the baby cores (kernels), and clang for tinygrad's CPU device (the tests' reference).
need=""
if ! command -v riscv64-unknown-elf-gcc >/dev/null 2>&1 && [ -z "${SFPI_ROOT:-}" ] && [ ! -d /opt/tenstorrent/sfpi ]; then
  need="$need gcc-riscv64-unknown-elf binutils-riscv64-unknown-elf"
fi
command -v clang >/dev/null 2>&1 || need="$need clang"
if [ -n "$need" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq $need >/dev/null
fi
python3 -m pip install -q -e '.[test]'
# The emulator's C part (runtime/emu/accel/native.py), built now with the host compiler into the cache; says which path
python3 -c "from tt_backend.runtime.emu.accel import native; print('emulator C part:', native.status())"
python3 -c "from tt_backend.runtime.emu.accel import sfpu_native; print('emulator SFPU C part:', sfpu_native.status())"
python3 -c "from tt_backend.runtime.emu.accel import rv32_native; print('emulator RISC-V cores:', rv32_native.status())"
python3 -c "from tt_backend.runtime.emu.accel import sfpu_issue_native; print('emulator SFPU issue:', sfpu_issue_native.status())"
python3 -c "from tt_backend.runtime.emu.accel import sfpu_issue_native; print('emulator other words:', sfpu_issue_native.plain_status())"
python3 -c "from tt_backend.runtime.emu.accel import sfpu_issue_native as s; print('emulator MOP batches:', s.batch_status())"
python3 -c "from tt_backend.runtime.emu.accel import tile_native; print('emulator tile words:', tile_native.status())"
python3 -c "from tt_backend.runtime.emu.accel import noc_native; print('emulator NoC reservations:', noc_native.status())"
