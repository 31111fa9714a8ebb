"""The emulator's speed layer: faster paths through the Tensix that leave every bit and every cycle exactly as the
reference units (runtime/emu/*.py) would, and refuse wherever they cannot prove it (tests/emu/test_emu_speed.py pins them
to the reference path).

* mop_batch.py   - a MOP of identical REPLAYs: K row steps of one SFPU body as one numpy pass per instruction
* deferral.py    - bodies pushed word by word: issue at once, execute the data later, batched
* sfpu_batch.py  - the batched data path both use, and the conditions under which it is exact
* fpu_batch.py   - back-to-back MVMULs: issued one by one, their Dst effect executed at once
* batch_timing.py - the cycle model across a batch's repetitions in closed form
* inline.py      - the measured-hot calls of the cycle model's rules expanded in place from their one definition
"""
