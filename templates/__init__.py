"""The kernel templates as package data: Jinja2 C99 templates (`*.c.j2`), the device library they include
(`device/*.h`), crt0 and the linker-script template. Python here: the paths to them, and the Jinja
environment over them with its on-disk cache of compiled templates (environment.py)."""
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent
DEVICE_LIB_DIR = TEMPLATE_DIR / "device"
