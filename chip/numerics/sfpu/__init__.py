"""The Vector Unit's (SFPU's) functional model: state.py (LRegs, lane flags, LaneConfig), one module per instruction
group with one handler per instruction, lane_math.py (the per-lane tables and functions), functional.py (the unit)."""
