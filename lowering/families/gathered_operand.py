"""A matmul operand gathered element by element (gathered_matmul): its index expression and gate over the kernel's
ranges, and the C the SFPU matmul's reader walks it with (templates/blocks/chunks.c.j2, mode "indexed")."""
from __future__ import annotations

from dataclasses import dataclass

from tt_backend.lowering.index import IndexExpr


@dataclass(frozen=True)
class Gather:
    """A gathered operand's element: `index` (element offset into the buffer) where `valid` holds (None: always),
    zero elsewhere; both over range variables r0.. numbered as `sizes`, which the element (batch, row, col) of the
    matmul decomposes into: `groups` = the range numbers of batch, row and column, outermost first."""
    index: IndexExpr
    valid: IndexExpr | None
    sizes: tuple[int, ...]
    groups: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]

    def ranges(self) -> frozenset[int]:
        """The range numbers the index and the gate read."""
        return self.index.ranges() | (self.valid.ranges() if self.valid is not None else frozenset())

    def render_c(self, fn: str) -> str:
        """C for the reader's walk along a row of the operand, the range values in an array rv[] (range j at rv[j]):
        `fn_at(rv, bt, row, col)` sets them for element (row, col) of flat batch bt (divisions, once per row),
        `fn_next(rv)` steps them to the next column (a carry, no division), and `fn(rv)` is the element's offset,
        -1 where the gate is off."""
        at = [f"static inline void {fn}_at(uint32_t *rv, uint32_t bt, uint32_t row, uint32_t col)", "{"]
        for flat, group in zip(("bt", "row", "col"), self.groups):
            for j, r in enumerate(reversed(group)):        # innermost first: r = flat % size, flat /= size
                if j == len(group) - 1: at.append(f"    rv[{r}] = {flat};")
                else: at.append(f"    rv[{r}] = {flat} % {self.sizes[r]}u; {flat} /= {self.sizes[r]}u;")
            at.append(f"    (void){flat};")
        nxt = [f"static inline void {fn}_next(uint32_t *rv)", "{"]
        for r in reversed(self.groups[2][1:]):               # the outermost column range never wraps inside a row
            nxt.append(f"    if (++rv[{r}] < {self.sizes[r]}u) return;")
            nxt.append(f"    rv[{r}] = 0u;")
        nxt.append(f"    ++rv[{self.groups[2][0]}];" if self.groups[2] else "    (void)rv;")
        ev = [f"static inline int32_t {fn}(const uint32_t *rv)", "{"]
        ev += [f"    const uint32_t r{r} = rv[{r}];" for r in sorted(self.ranges())]
        ev += ["    (void)rv;"]
        if self.valid is not None:
            ev.append(f"    if (!({self.valid.render_c()})) return -1;")
        ev.append(f"    return (int32_t)({self.index.render_c()});")
        return "\n".join(at + ["}", ""] + nxt + ["}", ""] + ev + ["}"])
