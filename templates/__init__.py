"""The kernel templates as package data: Jinja2 C99 templates (`*.c.j2`), the device library they include
(`device/*.h`), crt0 and the linker-script template. Nothing here is Python code but the path to them."""
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent
DEVICE_LIB_DIR = TEMPLATE_DIR / "device"
