"""Writes idct_amd64.s: idct8 (idct.go) and level8 of an 8x8 block with AVX2.

    python3 idct_amd64_gen.py > idct_amd64.s

TestIDCT8LevelGenerated checks that idct_amd64.s is this script's output, and
TestIDCTSIMD that its bytes are idct8's and level8's. The passes below are
idct8's statements, one for one, on variables; each variable lives in one YMM
register that holds it for 8 rows (row pass) or 8 columns (column pass) at once.
Registers are handed out from a free list, so a statement never overwrites a value
that a later statement reads.
"""

# The constants' rows in idctConstants (idct.go), each 32 bytes (8 lanes).
CONST = ["c6a_cos", "c6a_smc", "c6a_cps", "c3_cos", "c3_smc", "c3_cps", "c1_cos", "c1_smc",
         "c1_cps", "r8", "c6b_cos", "c6b_smc", "c6b_cps", "r14", "bias19", "level"]

# Where output row k goes: DI = dst, CX = stride, R13 = 3*stride, R12 = dst + 3*stride.
ROW_ADDR = ["(DI)", "(DI)(CX*1)", "(DI)(CX*2)", "(R12)", "(DI)(CX*4)", "(R12)(CX*2)",
            "(DI)(R13*2)", "(R12)(CX*4)"]

# idct8's names for the 8 inputs of a pass, by position.
NAMES = ["x0", "x7", "x2", "x5", "x1", "x6", "x3", "x4"]

out = []
free = [f"Y{i}" for i in range(16)]
reg = {}


def emit(s, comment=""):
    out.append("\t" + s + (f" // {comment}" if comment else ""))


def alloc(v):
    reg[v] = free.pop(0)
    return reg[v]


def release(v):
    free.insert(0, reg.pop(v))


def rename(old, new):
    reg[new] = reg.pop(old)


def const(name):
    return f"{32 * CONST.index(name)}(DX)"


def shift(op, n, *vs):
    for v in vs:
        emit(f"{op} ${n}, {reg[v]}, {reg[v]}")


def butterfly(p, q):
    """p, q = p+q, p-q"""
    t = alloc("sum")
    emit(f"VPADDD {reg[q]}, {reg[p]}, {t}")
    emit(f"VPSUBD {reg[q]}, {reg[p]}, {reg[q]}")
    reg[p], reg["sum"] = t, reg[p]
    release("sum")


def dct_box(a, b, k):
    """a, b = dctBox(a, b, kcos, ksin): ksum = kcos*(a+b); a = ksum + (ksin-kcos)*b,
    b = ksum - (kcos+ksin)*a."""
    s = alloc("ksum")
    emit(f"VPADDD {reg[b]}, {reg[a]}, {s}")
    emit(f"VPMULLD {const(k + '_cos')}, {s}, {s}")
    emit(f"VPMULLD {const(k + '_smc')}, {reg[b]}, {reg[b]}")
    emit(f"VPMULLD {const(k + '_cps')}, {reg[a]}, {reg[a]}")
    emit(f"VPADDD {reg[b]}, {s}, {reg[b]}")
    emit(f"VPSUBD {reg[a]}, {s}, {reg[a]}")
    reg[a], reg[b] = reg[b], reg[a]
    release("ksum")


def odd_tail(s):
    """The end of a pass, rows or columns: the odd part's last butterflies and
    rotations (after shifting right by s), then the even and odd halves joined."""
    butterfly("x7", "x5")
    butterfly("x4", "x6")
    shift("VPSRAD", s, "x4", "x7")
    dct_box("x4", "x7", "c3")
    shift("VPSRAD", s, "x5", "x6")
    dct_box("x5", "x6", "c1")
    for p, q in (("x0", "x7"), ("x1", "x6"), ("x2", "x5"), ("x3", "x4")):
        butterfly(p, q)


def transpose(rows):
    """The 8x8 int32 transpose of variables rows (each 8 lanes): returns variables
    T0..T7, Tj holding lane j of every row."""
    lo, hi = [], []
    for p in range(4):  # 32-bit interleaves of row pairs
        a, b = reg[rows[2 * p]], reg[rows[2 * p + 1]]
        emit(f"VPUNPCKLDQ {b}, {a}, {alloc(f'lo{p}')}")
        emit(f"VPUNPCKHDQ {b}, {a}, {alloc(f'hi{p}')}")
        lo.append(f"lo{p}")
        hi.append(f"hi{p}")
        release(rows[2 * p])
        release(rows[2 * p + 1])
    quads = {}
    for half, (pa, pb) in enumerate([(0, 1), (2, 3)]):  # 64-bit interleaves: rows 0-3, 4-7
        for kind, src in (("lo", lo), ("hi", hi)):
            a, b = reg[src[pa]], reg[src[pb]]
            for s, op in enumerate(("VPUNPCKLQDQ", "VPUNPCKHQDQ")):
                quads[half, kind, s] = f"q{half}{kind}{s}"
                emit(f"{op} {b}, {a}, {alloc(quads[half, kind, s])}")
            release(src[pa])
            release(src[pb])
    for j, (kind, s) in enumerate([("lo", 0), ("lo", 1), ("hi", 0), ("hi", 1)]):  # 128-bit halves
        a, b = reg[quads[0, kind, s]], reg[quads[1, kind, s]]
        emit(f"VPERM2I128 $0x20, {b}, {a}, {alloc(f'T{j}')}")
        emit(f"VPERM2I128 $0x31, {b}, {a}, {alloc(f'T{j + 4}')}")
        release(quads[0, kind, s])
        release(quads[1, kind, s])
    return [f"T{j}" for j in range(8)]


def main():
    for i in range(8):
        emit(f"VMOVDQU {32 * i}(SI), {alloc(f'r{i}')}")
    for j, t in enumerate(transpose([f"r{i}" for i in range(8)])):
        rename(t, NAMES[j])

    emit("// Rows (idct8's first loop).")
    shift("VPSLLD", 17, "x0", "x1")
    butterfly("x0", "x1")
    dct_box("x2", "x3", "c6a")
    butterfly("x1", "x2")
    butterfly("x0", "x3")
    shift("VPSLLD", 7, "x4", "x7")
    butterfly("x7", "x4")
    for v in ("x6", "x5"):
        emit(f"VPMULLD {const('r8')}, {reg[v]}, {reg[v]}")
    odd_tail(2)

    for j, t in enumerate(transpose([f"x{j}" for j in range(8)])):
        rename(t, NAMES[j])

    emit("// Columns (idct8's second loop).")
    emit(f"VPADDD {const('bias19')}, {reg['x0']}, {reg['x0']}")
    butterfly("x0", "x1")
    shift("VPSRAD", 2, "x0", "x1")
    shift("VPSRAD", 13, "x2", "x3")
    dct_box("x2", "x3", "c6b")
    butterfly("x1", "x2")
    butterfly("x0", "x3")
    butterfly("x7", "x4")
    for v in ("x5", "x6"):
        shift("VPSRAD", 13, v)
        emit(f"VPMULLD {const('r14')}, {reg[v]}, {reg[v]}")
    odd_tail(14)

    emit("// Output row k is xk>>18 + 128, clipped to 0..255 by the saturating packs.")
    for j in range(8):
        shift("VPSRAD", 18, f"x{j}")
        emit(f"VPADDD {const('level')}, {reg[f'x{j}']}, {reg[f'x{j}']}")
    for a, b in ((0, 1), (2, 3), (4, 5), (6, 7)):
        ra, rb = reg[f"x{a}"], reg[f"x{b}"]
        emit(f"VPACKSSDW {rb}, {ra}, {ra}")
        emit(f"VPERMQ $0xD8, {ra}, {ra}", f"rows {a} | {b}, int16")
        release(f"x{b}")
    for a, b in ((0, 2), (4, 6)):
        ra, rb = reg[f"x{a}"], reg[f"x{b}"]
        xa = "X" + ra[1:]
        emit(f"VPACKUSWB {rb}, {ra}, {ra}", f"rows {a}, {b} | {a + 1}, {b + 1}, bytes")
        emit(f"VMOVQ {xa}, AX")
        emit(f"VPEXTRQ $1, {xa}, R9")
        emit(f"VEXTRACTI128 $1, {ra}, {xa}")
        emit(f"VMOVQ {xa}, R10")
        emit(f"VPEXTRQ $1, {xa}, R11")
        for row, r in ((a, "AX"), (b, "R9"), (a + 1, "R10"), (b + 1, "R11")):
            emit(f"MOVQ {r}, {ROW_ADDR[row]}", f"row {row}")

    print(f"""// Code generated by idct_amd64_gen.py; DO NOT EDIT.

//go:build amd64 && !purego

#include "textflag.h"

// func idct8Level(b *[blockSize]int32, dst *byte, stride int, k *idctConstants)
//
// idct8 of b, then level8 of every output, stored as 8 rows of 8 bytes
// stride apart at dst (reconstruct at scale 1). The same int32 operations
// as idct8, 8 rows or columns at once: the block is transposed so that each
// register holds one position of the 8 rows, the row pass runs, the result
// is transposed back so that each register holds one row, and the column
// pass runs across the 8 columns. k holds each constant in all 8 lanes.
TEXT ·idct8Level(SB), NOSPLIT, $0-32
\tMOVQ b+0(FP), SI
\tMOVQ dst+8(FP), DI
\tMOVQ stride+16(FP), CX
\tMOVQ k+24(FP), DX
\tLEAQ (CX)(CX*2), R13
\tLEAQ (DI)(R13*1), R12
""" + "\n".join(out) + "\n\tVZEROUPPER\n\tRET")


main()
