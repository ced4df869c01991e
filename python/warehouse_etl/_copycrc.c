/* warehouse_etl._copycrc: a copy and its CRC-32C in one pass over the bytes.
 *
 * A first read of a sample copies its image from the shard's mapping and checks
 * it against the shard's CRC-32C table. Copying, then computing the CRC of the
 * copy, costs a second pass: about 25 us per 443 KB sample with ISA-L, 35-40% of
 * a first read (docs/performance.md, "A copy and its check in one pass"). Here
 * the CRC is folded from the vector registers the copy loads anyway, with
 * carry-less multiplications that run while the loads wait for memory.
 *
 * The fold is the one shard/checksum_amd64.s uses for the Go reader (Gopal et
 * al., "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 * Instruction", Intel, 2009, for a bit-reflected CRC): four 256-bit
 * accumulators, 128 bytes a step, each 128-bit lane's low and high halves
 * multiplied by x^(1024+32) and x^(1024-32) mod P (bit-reflected) and xored
 * with the data 128 bytes on; at the end the accumulators are folded onto the
 * last one, its lanes onto each other, and the CRC32 instruction takes the
 * 16-byte remainder from a zero register. Bytes past the last whole step go
 * through the CRC32 instruction 8 at a time (tail).
 *
 * Two levels of it: AVX2 with VPCLMULQDQ (256-bit registers; x86-64 since Intel Ice
 * Lake and AMD Zen 3) and PCLMULQDQ with SSE4.2 (128-bit, eight accumulators; every
 * x86-64 CPU since Intel Westmere and AMD Bulldozer). On arm64 (Linux and macOS) the
 * CRC32C instructions do the work instead, in three streams joined with PMULL (level 2)
 * or in one (level 1, CRC32 without the Crypto extension); see FOLD_ARM64 below.
 * LEVEL names the one this CPU runs (MAX_LEVEL: 2, 1, or 0 for none); AVAILABLE is
 * False where it runs none, on other architectures and with compilers without these
 * intrinsics, and the package copies and checks in two passes there, as before.
 *
 * The functions take addresses (ints), as the package's ctypes calls of ISA-L
 * do: the caller owns the bounds. Registers are raw (not inverted): the CRC-32C
 * of a message is crc32c(addr, n, 0xFFFFFFFF) ^ 0xFFFFFFFF, continued by
 * passing the register on. Calls of 64 KiB and more release the GIL.
 */
#ifndef COPYCRC_FOLD_ONLY
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif
#include <stdint.h>
#include <string.h>
#ifndef COPYCRC_FOLD_ONLY
#include <sys/mman.h>
#include <unistd.h>
#endif

#define RELEASE_BYTES (64 << 10)

/* COPYCRC_PORTABLE builds it without the fold, as on other architectures (a check that
 * that build compiles: gcc -DCOPYCRC_PORTABLE). COPYCRC_FOLD_ONLY leaves out the Python
 * module: python/tests/copycrc_harness.c includes this file that way, to test the folds
 * of each architecture against hash/crc32 (amd64 natively, arm64 under qemu). */
#if defined(COPYCRC_PORTABLE) || !(defined(__GNUC__) || defined(__clang__))
#define HAVE_FOLD 0
#elif defined(__x86_64__) || defined(_M_X64)
#define HAVE_FOLD 1
#define FOLD_X86 1
#elif defined(__aarch64__) && (defined(__linux__) || defined(__APPLE__))
#define HAVE_FOLD 1
#define FOLD_ARM64 1
#else
#define HAVE_FOLD 0
#endif

#if HAVE_FOLD
#define ALWAYS_INLINE __attribute__((always_inline))

/* The two entry points of an inline fold inner(dst, src, n, reg, copy), compiled for
 * target: name_copy (copying) and name_only. */
#define FOLD_ENTRIES(name, inner, target)                                                 \
    static uint32_t name##_copy(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg) target; \
    static uint32_t name##_copy(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg) {       \
        return inner(dst, src, n, reg, 1);                                                \
    }                                                                                     \
    static uint32_t name##_only(const uint8_t *src, size_t n, uint32_t reg) target;        \
    static uint32_t name##_only(const uint8_t *src, size_t n, uint32_t reg) {              \
        return inner(NULL, src, n, reg, 0);                                               \
    }

static uint32_t reverse32(uint32_t x) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        r = (r << 1) | (x & 1);
        x >>= 1;
    }
    return r;
}

static uint64_t mulmod(uint64_t a, uint64_t b, uint64_t p) {
    uint64_t r = 0;
    for (int i = 31; i >= 0; i--) {
        r <<= 1;
        if (r & (1ull << 32)) r ^= p;
        if ((b >> i) & 1) r ^= a;
    }
    return r;
}

/* x^e mod P, P the CRC-32C polynomial 0x1EDC6F41 (0x82F63B78 bit-reflected), in
 * normal bit order (bit i: x^i). */
static uint32_t xpow_mod(unsigned e) {
    uint64_t p = (1ull << 32) | reverse32(0x82F63B78u), r = 1, base = 2;
    for (; e; e >>= 1) {
        if (e & 1) r = mulmod(r, base, p);
        base = mulmod(base, base, p);
    }
    return (uint32_t)r;
}
#endif

#if FOLD_X86
#include <immintrin.h>

/* x^e mod P bit-reflected and shifted left by one (33 bits), as the fold multiplies
 * by it (shard/checksum.go, foldConst). */
static uint64_t fold_const(unsigned e) { return (uint64_t)reverse32(xpow_mod(e)) << 1; }

/* (lo, hi) pairs: d = 1024 (one step), 256 (an accumulator onto the next),
 * 128 (lane 0 onto lane 1). */
static uint64_t k_step[2], k_acc[2], k_lane[2];

/* The bytes past the last whole step (fewer than 128, or a message under 256 bytes):
 * the CRC32 instruction 8 bytes at a time, then 1. */
static inline uint32_t tail(uint8_t *dst, const uint8_t *src, size_t n, uint64_t c, int copy)
    __attribute__((target("sse4.2"))) ALWAYS_INLINE;
static inline uint32_t tail(uint8_t *dst, const uint8_t *src, size_t n, uint64_t c, int copy) {
    for (; n >= 8; n -= 8, src += 8) {
        uint64_t w;
        memcpy(&w, src, 8);
        if (copy) {
            memcpy(dst, &w, 8);
            dst += 8;
        }
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; n; n--) {
        if (copy) *dst++ = *src;
        c32 = _mm_crc32_u8(c32, *src++);
    }
    return c32;
}

/* After the vector steps: the CRC of the 16-byte remainder from a zero register is the
 * register after the bytes folded; the bytes past them (from offset i) go to tail. */
static inline uint32_t after_steps(__m128i rem, uint8_t *dst, const uint8_t *src, size_t n, size_t i, int copy)
    __attribute__((target("sse4.2"))) ALWAYS_INLINE;
static inline uint32_t after_steps(__m128i rem, uint8_t *dst, const uint8_t *src, size_t n, size_t i, int copy) {
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(rem));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(rem, 1));
    return tail(copy ? dst + i : NULL, src + i, n - i, c, copy);
}

/* name_stream: a copy whose stores bypass the caches (MOVNTDQ), for large copies
 * (stream_bytes): the bytes up to dst's next 32-byte boundary through tail, the rest
 * through inner with copy 2, then SFENCE. A regular store first reads the line it
 * writes into the cache (read for ownership): copying a sample into a batch of many
 * megabytes, the stores that skip it move a third fewer bytes to and from memory, and
 * leave the caches to what is read next. */
#define STREAM_ENTRY(name, inner, target)                                                  \
    static uint32_t name##_stream(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg) target; \
    static uint32_t name##_stream(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg) {       \
        size_t h = (size_t)(-(uintptr_t)dst & 31);                                         \
        if (n < h + 256) return inner(dst, src, n, reg, 1);                                \
        reg = tail(dst, src, h, reg, 1);                                                   \
        reg = inner(dst + h, src + h, n - h, reg, 2);                                      \
        _mm_sfence();                                                                      \
        return reg;                                                                        \
    }

#define FOLD_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
#define FOLD256(x, k) \
    _mm256_xor_si256(_mm256_clmulepi64_epi128((x), (k), 0x00), _mm256_clmulepi64_epi128((x), (k), 0x11))
/* Loads ahead of the step being folded: the mapping's pages come from memory,
 * and a loop slowed by its multiplications keeps fewer loads in flight. */
#define PREFETCH_BYTES 2048

/* copy 2: stores that bypass the caches (MOVNTDQ) to a 32-byte aligned dst (see
 * STREAM_ENTRY). */
#define STORE256(p, v) \
    (copy == 2 ? _mm256_stream_si256((__m256i *)(p), (v)) : _mm256_storeu_si256((__m256i *)(p), (v)))
#define STORE128(p, v) (copy == 2 ? _mm_stream_si128((__m128i *)(p), (v)) : _mm_storeu_si128((__m128i *)(p), (v)))

/* The register after src[0:n] from reg; with copy (1, or 2 for cache-bypassing stores)
 * the bytes are copied to dst too. */
static inline uint32_t fold(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int copy) FOLD_TARGET ALWAYS_INLINE;
static inline uint32_t fold(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int copy) {
    if (n < 256) return tail(dst, src, n, reg, copy);
    const __m256i step = _mm256_set_epi64x((long long)k_step[1], (long long)k_step[0],
                                           (long long)k_step[1], (long long)k_step[0]);
    __m256i x0 = _mm256_loadu_si256((const __m256i *)src);
    __m256i x1 = _mm256_loadu_si256((const __m256i *)(src + 32));
    __m256i x2 = _mm256_loadu_si256((const __m256i *)(src + 64));
    __m256i x3 = _mm256_loadu_si256((const __m256i *)(src + 96));
    if (copy) {
        STORE256(dst, x0);
        STORE256(dst + 32, x1);
        STORE256(dst + 64, x2);
        STORE256(dst + 96, x3);
    }
    /* The register enters as the first 4 bytes' xor. */
    x0 = _mm256_xor_si256(x0, _mm256_set_epi64x(0, 0, 0, (long long)reg));
    size_t i = 128;
    for (; i + 128 <= n; i += 128) {
        _mm_prefetch((const char *)(src + i + PREFETCH_BYTES), _MM_HINT_T0);
        _mm_prefetch((const char *)(src + i + PREFETCH_BYTES + 64), _MM_HINT_T0);
        __m256i y0 = _mm256_loadu_si256((const __m256i *)(src + i));
        __m256i y1 = _mm256_loadu_si256((const __m256i *)(src + i + 32));
        __m256i y2 = _mm256_loadu_si256((const __m256i *)(src + i + 64));
        __m256i y3 = _mm256_loadu_si256((const __m256i *)(src + i + 96));
        if (copy) {
            STORE256(dst + i, y0);
            STORE256(dst + i + 32, y1);
            STORE256(dst + i + 64, y2);
            STORE256(dst + i + 96, y3);
        }
        x0 = _mm256_xor_si256(FOLD256(x0, step), y0);
        x1 = _mm256_xor_si256(FOLD256(x1, step), y1);
        x2 = _mm256_xor_si256(FOLD256(x2, step), y2);
        x3 = _mm256_xor_si256(FOLD256(x3, step), y3);
    }
    const __m256i acc = _mm256_set_epi64x((long long)k_acc[1], (long long)k_acc[0],
                                          (long long)k_acc[1], (long long)k_acc[0]);
    x1 = _mm256_xor_si256(x1, FOLD256(x0, acc));
    x2 = _mm256_xor_si256(x2, FOLD256(x1, acc));
    x3 = _mm256_xor_si256(x3, FOLD256(x2, acc));
    const __m128i lane = _mm_set_epi64x((long long)k_lane[1], (long long)k_lane[0]);
    __m128i l0 = _mm256_castsi256_si128(x3), l1 = _mm256_extracti128_si256(x3, 1);
    l1 = _mm_xor_si128(l1, _mm_xor_si128(_mm_clmulepi64_si128(l0, lane, 0x00),
                                         _mm_clmulepi64_si128(l0, lane, 0x11)));
    return after_steps(l1, dst, src, n, i, copy);
}

FOLD_ENTRIES(fold, fold, FOLD_TARGET)
STREAM_ENTRY(fold, fold, FOLD_TARGET)

/* The same fold on 128-bit registers (PCLMULQDQ and SSE4.2: every x86-64 CPU since
 * Intel Westmere and AMD Bulldozer): eight accumulators, 128 bytes a step, each lane
 * moved on by the same constants; at the end each is folded onto the next (d = 128). */
#define SSE_TARGET __attribute__((target("pclmul,sse4.2")))
#define FOLD128(x, k) _mm_xor_si128(_mm_clmulepi64_si128((x), (k), 0x00), _mm_clmulepi64_si128((x), (k), 0x11))
/* The eight accumulators are named (x0..x7), not an array, so that they stay in
 * registers: one lane j of a step reads 16 bytes at p + 16j (copying them to q + 16j). */
#define SSE_LOAD(j, p, q)                                         \
    x##j = _mm_loadu_si128((const __m128i *)((p) + 16 * j));      \
    if (copy) STORE128((q) + 16 * j, x##j)
#define SSE_LANE(j, p, q)                                                  \
    do {                                                                   \
        __m128i y_ = _mm_loadu_si128((const __m128i *)((p) + 16 * j));     \
        if (copy) STORE128((q) + 16 * j, y_);                              \
        x##j = _mm_xor_si128(FOLD128(x##j, step), y_);                      \
    } while (0)
#define SSE_FIRST(p, q)                                                                    \
    __m128i x0, x1, x2, x3, x4, x5, x6, x7;                                                \
    SSE_LOAD(0, p, q); SSE_LOAD(1, p, q); SSE_LOAD(2, p, q); SSE_LOAD(3, p, q);           \
    SSE_LOAD(4, p, q); SSE_LOAD(5, p, q); SSE_LOAD(6, p, q); SSE_LOAD(7, p, q);           \
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)reg))
#define SSE_STEP(p, q)                                                                     \
    SSE_LANE(0, p, q); SSE_LANE(1, p, q); SSE_LANE(2, p, q); SSE_LANE(3, p, q);           \
    SSE_LANE(4, p, q); SSE_LANE(5, p, q); SSE_LANE(6, p, q); SSE_LANE(7, p, q)
/* Each accumulator onto the next (d = 128): x7 holds the 16-byte remainder. */
#define SSE_REDUCE()                                                                      \
    do {                                                                                   \
        const __m128i lane = _mm_set_epi64x((long long)k_lane[1], (long long)k_lane[0]);   \
        x1 = _mm_xor_si128(x1, FOLD128(x0, lane));                                         \
        x2 = _mm_xor_si128(x2, FOLD128(x1, lane));                                         \
        x3 = _mm_xor_si128(x3, FOLD128(x2, lane));                                         \
        x4 = _mm_xor_si128(x4, FOLD128(x3, lane));                                         \
        x5 = _mm_xor_si128(x5, FOLD128(x4, lane));                                         \
        x6 = _mm_xor_si128(x6, FOLD128(x5, lane));                                         \
        x7 = _mm_xor_si128(x7, FOLD128(x6, lane));                                         \
    } while (0)

static inline uint32_t fold_sse(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int copy) SSE_TARGET ALWAYS_INLINE;
static inline uint32_t fold_sse(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int copy) {
    if (n < 256) return tail(dst, src, n, reg, copy);
    const __m128i step = _mm_set_epi64x((long long)k_step[1], (long long)k_step[0]);
    SSE_FIRST(src, dst);
    size_t i = 128;
    for (; i + 128 <= n; i += 128) {
        _mm_prefetch((const char *)(src + i + PREFETCH_BYTES), _MM_HINT_T0);
        _mm_prefetch((const char *)(src + i + PREFETCH_BYTES + 64), _MM_HINT_T0);
        SSE_STEP(src + i, dst + i);
    }
    SSE_REDUCE();
    return after_steps(x7, dst, src, n, i, copy);
}

FOLD_ENTRIES(sse, fold_sse, SSE_TARGET)
STREAM_ENTRY(sse, fold_sse, SSE_TARGET)

/* The widest fold this CPU runs: 2 (AVX2 and VPCLMULQDQ), 1 (PCLMULQDQ and SSE4.2),
 * 0 (neither). */
static int cpu_level(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("pclmul") || !__builtin_cpu_supports("sse4.2")) return 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq") ? 2 : 1;
}

static void fold_constants(void) {
    k_step[0] = fold_const(1024 + 32);
    k_step[1] = fold_const(1024 - 32);
    k_acc[0] = fold_const(256 + 32);
    k_acc[1] = fold_const(256 - 32);
    k_lane[0] = fold_const(128 + 32);
    k_lane[1] = fold_const(128 - 32);
}

static const char *const level_names[] = {"", "sse4.2-pclmulqdq", "avx2-vpclmulqdq"};
#define LEVEL2_COPY fold_copy
#define LEVEL2_STREAM fold_stream
#define LEVEL2_ONLY fold_only
#define LEVEL1_COPY sse_copy
#define LEVEL1_STREAM sse_stream
#define LEVEL1_ONLY sse_only
#endif /* FOLD_X86 */

#if FOLD_ARM64
/* ARMv8's CRC32C instructions (CRC32CX: 8 bytes into the register; optional in ARMv8.0,
 * required from ARMv8.1, on every arm64 server and Apple CPU), two levels as on x86-64:
 *   1. one register, 32 bytes a step (CRC32 alone);
 *   2. three registers over three 1 KiB streams of each 3 KiB block, then joined with
 *      PMULL (Crypto extension): CRC32CX waits 2-3 cycles for its register and starts
 *      one a cycle, so three streams keep it busy where one stream runs at a half to a third.
 * The join: the register after a block is shift(c0, 2 KiB) ^ shift(c1, 1 KiB) ^ c2
 * (c0 continued from the register before the block, c1 and c2 from zero; a raw
 * register is linear in the register and the bytes). shift(c, L), the register after
 * L zero bytes, is c * x^(8L) mod P: PMULL of c (bit-reflected, 32 bits) by
 * k = x^(8L-33) mod P (bit-reflected) is c*k*x in 64 reflected bits, and CRC32CX from
 * zero multiplies a 64-bit word by x^32 mod P. */
#include <arm_acle.h>
#include <arm_neon.h>
#if defined(__clang__)
#define CRC_TARGET __attribute__((target("crc")))
#define PMULL_TARGET __attribute__((target("crc,aes")))
#else
#define CRC_TARGET __attribute__((target("+crc")))
#define PMULL_TARGET __attribute__((target("+crc+crypto")))
#endif
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_PMULL
#define HWCAP_PMULL (1 << 4)
#endif
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

#define STREAM_BYTES 1024
static uint64_t k_stream1, k_stream2; /* shift by one stream (1 KiB), by two */

static void fold_constants(void) {
    k_stream1 = reverse32(xpow_mod(8 * STREAM_BYTES - 33));
    k_stream2 = reverse32(xpow_mod(8 * 2 * STREAM_BYTES - 33));
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* One register: 32 bytes a step, then 8, then 1. */
static inline uint32_t crc_serial(uint8_t *dst, const uint8_t *src, size_t n, uint32_t c, int copy)
    CRC_TARGET ALWAYS_INLINE;
static inline uint32_t crc_serial(uint8_t *dst, const uint8_t *src, size_t n, uint32_t c, int copy) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w0 = load64(src + i), w1 = load64(src + i + 8), w2 = load64(src + i + 16),
                 w3 = load64(src + i + 24);
        if (copy) {
            memcpy(dst + i, &w0, 8);
            memcpy(dst + i + 8, &w1, 8);
            memcpy(dst + i + 16, &w2, 8);
            memcpy(dst + i + 24, &w3, 8);
        }
        c = __crc32cd(c, w0);
        c = __crc32cd(c, w1);
        c = __crc32cd(c, w2);
        c = __crc32cd(c, w3);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t w = load64(src + i);
        if (copy) memcpy(dst + i, &w, 8);
        c = __crc32cd(c, w);
    }
    for (; i < n; i++) {
        if (copy) dst[i] = src[i];
        c = __crc32cb(c, src[i]);
    }
    return c;
}

static inline uint32_t shift_crc(uint32_t c, uint64_t k) PMULL_TARGET ALWAYS_INLINE;
static inline uint32_t shift_crc(uint32_t c, uint64_t k) {
    poly128_t p = vmull_p64((poly64_t)c, (poly64_t)k);
    return __crc32cd(0, vgetq_lane_u64(vreinterpretq_u64_p128(p), 0));
}

/* Three streams of each 3 KiB block, joined; the bytes past the last block serially. */
static inline uint32_t crc_streams(uint8_t *dst, const uint8_t *src, size_t n, uint32_t c, int copy)
    PMULL_TARGET ALWAYS_INLINE;
static inline uint32_t crc_streams(uint8_t *dst, const uint8_t *src, size_t n, uint32_t c, int copy) {
    const size_t s = STREAM_BYTES;
    size_t i = 0;
    for (; i + 3 * s <= n; i += 3 * s) {
        const uint8_t *a = src + i, *b = a + s, *e = b + s;
        uint32_t c0 = c, c1 = 0, c2 = 0;
        for (size_t j = 0; j < s; j += 16) {
            uint64_t a0 = load64(a + j), a1 = load64(a + j + 8), b0 = load64(b + j), b1 = load64(b + j + 8),
                     e0 = load64(e + j), e1 = load64(e + j + 8);
            if (copy) {
                uint8_t *q = dst + i + j;
                memcpy(q, &a0, 8);
                memcpy(q + 8, &a1, 8);
                memcpy(q + s, &b0, 8);
                memcpy(q + s + 8, &b1, 8);
                memcpy(q + 2 * s, &e0, 8);
                memcpy(q + 2 * s + 8, &e1, 8);
            }
            c0 = __crc32cd(c0, a0);
            c1 = __crc32cd(c1, b0);
            c2 = __crc32cd(c2, e0);
            c0 = __crc32cd(c0, a1);
            c1 = __crc32cd(c1, b1);
            c2 = __crc32cd(c2, e1);
        }
        c = shift_crc(c0, k_stream2) ^ shift_crc(c1, k_stream1) ^ c2;
    }
    return crc_serial(copy ? dst + i : NULL, src + i, n - i, c, copy);
}

FOLD_ENTRIES(streams, crc_streams, PMULL_TARGET)
FOLD_ENTRIES(serial, crc_serial, CRC_TARGET)

/* 2 (CRC32 and PMULL), 1 (CRC32), 0 (neither). Every Apple arm64 CPU has both. */
static int cpu_level(void) {
#if defined(__linux__)
    unsigned long hw = getauxval(AT_HWCAP);
    if (!(hw & HWCAP_CRC32)) return 0;
    return hw & HWCAP_PMULL ? 2 : 1;
#else
    return 2;
#endif
}

static const char *const level_names[] = {"", "armv8-crc32", "armv8-crc32-pmull"};
/* No cache-bypassing stores here (STNP is only a hint, and untimed on arm64): streaming
 * copies store as the others. */
#define LEVEL2_COPY streams_copy
#define LEVEL2_STREAM streams_copy
#define LEVEL2_ONLY streams_only
#define LEVEL1_COPY serial_copy
#define LEVEL1_STREAM serial_copy
#define LEVEL1_ONLY serial_only
#endif /* FOLD_ARM64 */

#if !HAVE_FOLD
static const char *const level_names[] = {""};
#endif

static int level, cpu_max_level; /* the fold in use (set_level may lower it), this CPU's best */
#define available (level > 0)

#if HAVE_FOLD
static void fold_init(void) {
    fold_constants();
    level = cpu_max_level = cpu_level();
}

/* stream: the cache-bypassing stores (the call copies stream_bytes or more). */
static uint32_t copy_fold(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int stream) {
    if (stream) return level == 2 ? LEVEL2_STREAM(dst, src, n, reg) : LEVEL1_STREAM(dst, src, n, reg);
    return level == 2 ? LEVEL2_COPY(dst, src, n, reg) : LEVEL1_COPY(dst, src, n, reg);
}

static uint32_t only_fold(const uint8_t *src, size_t n, uint32_t reg) {
    return level == 2 ? LEVEL2_ONLY(src, n, reg) : LEVEL1_ONLY(src, n, reg);
}
#endif

#ifndef COPYCRC_FOLD_ONLY
/* Copies of this many bytes or more (copy_crc32c), and gather_rows calls that write this
 * many bytes of images or more, store past the caches (STREAM_ENTRY; x86-64): a
 * destination that large (read_batch's batches are megabytes) is not read back from the
 * caches anyway. set_stream_bytes changes it, for tests and benchmarks. */
static size_t stream_bytes = 256 << 10;

/* Arguments: ints, n of them; each converted with PyLong_AsUnsignedLongLong (a negative
 * or too large one raises OverflowError) after a type check (an address, a length, a
 * register). */
static int unsigned_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const char *name,
                         unsigned long long *out) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < want; i++) {
        if (!PyLong_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "%s: argument %zd must be an int", name, i + 1);
            return -1;
        }
        out[i] = PyLong_AsUnsignedLongLong(args[i]);
        if (out[i] == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* The GIL released for a call over bytes >= RELEASE_BYTES (else NULL: kept), and taken
 * back (reacquire). */
static inline PyThreadState *release_for(size_t bytes) { return bytes >= RELEASE_BYTES ? PyEval_SaveThread() : NULL; }
static inline void reacquire(PyThreadState *released) {
    if (released != NULL) PyEval_RestoreThread(released);
}

static int check_ready(const char *name, unsigned long long reg) {
    if (!available) {
        PyErr_Format(PyExc_RuntimeError, "%s: this CPU or build has no fold (AVAILABLE is False)", name);
        return -1;
    }
    if (reg > 0xFFFFFFFFull) {
        PyErr_Format(PyExc_ValueError, "%s: register %llu does not fit 32 bits", name, reg);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(copy_crc32c_doc,
             "copy_crc32c(dst, src, n, reg[, count, stride]) -> reg\n\n"
             "Copy n bytes from address src to address dst (not overlapping) and return the\n"
             "CRC-32C register after them, continued from reg (raw: start at 0xFFFFFFFF,\n"
             "invert the result). With count and stride: count blocks of n bytes, contiguous\n"
             "at src, block k copied to dst + k * stride (the planes of a compact sample's\n"
             "region into its image); the CRC is of the count * n bytes at src. The GIL is\n"
             "released once for the whole call.");

static PyObject *copy_crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long a[6] = {0, 0, 0, 0, 1, 0};
    if (nargs != 4 && nargs != 6) {
        PyErr_Format(PyExc_TypeError, "copy_crc32c takes 4 or 6 arguments (%zd given)", nargs);
        return NULL;
    }
    if (unsigned_args(args, nargs, nargs, "copy_crc32c", a) < 0) return NULL;
    if (check_ready("copy_crc32c", a[3]) < 0) return NULL;
    uint32_t reg = (uint32_t)a[3];
#if HAVE_FOLD
    uint8_t *dst = (uint8_t *)(uintptr_t)a[0];
    const uint8_t *src = (const uint8_t *)(uintptr_t)a[1];
    size_t n = (size_t)a[2], count = (size_t)a[4], stride = nargs == 6 ? (size_t)a[5] : n;
    if (count && n > (size_t)-1 / count) {
        PyErr_SetString(PyExc_OverflowError, "copy_crc32c: count * n overflows");
        return NULL;
    }
    int stream = n * count >= stream_bytes;
    PyThreadState *released = release_for(n * count);
    for (size_t k = 0; k < count; k++) reg = copy_fold(dst + k * stride, src + k * n, n, reg, stream);
    reacquire(released);
#endif
    return PyLong_FromUnsignedLong(reg);
}

PyDoc_STRVAR(crc32c_doc,
             "crc32c(src, n, reg) -> reg\n\n"
             "The CRC-32C register after n bytes at address src, continued from reg (raw).");

static PyObject *crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long a[3];
    if (unsigned_args(args, nargs, 3, "crc32c", a) < 0 || check_ready("crc32c", a[2]) < 0) return NULL;
    uint32_t reg = (uint32_t)a[2];
#if HAVE_FOLD
    const uint8_t *src = (const uint8_t *)(uintptr_t)a[0];
    size_t n = (size_t)a[1];
    PyThreadState *released = release_for(n);
    reg = only_fold(src, n, reg);
    reacquire(released);
#endif
    return PyLong_FromUnsignedLong(reg);
}

PyDoc_STRVAR(crc32c_rows_doc,
             "crc32c_rows(parts, r, reg) -> reg\n\n"
             "The CRC-32C register after row r of each part in turn, continued from reg (raw):\n"
             "parts is a tuple of (address, row bytes) pairs, a part's row r the row-bytes bytes\n"
             "at address + r * row bytes (row r of a C-contiguous array). One call for the small\n"
             "arrays a sample's CRC continues over after its image.");

#define MAX_ROW_PARTS 16

/* parts, a tuple of at most MAX_ROW_PARTS (address, row bytes) pairs, into part (and
 * its count into *k, the sum of the row bytes into *total); -1 with an exception set
 * when it is not one. */
static int row_parts(PyObject *parts, const char *name, unsigned long long part[MAX_ROW_PARTS][2], Py_ssize_t *k,
                     size_t *total) {
    *k = PyTuple_GET_SIZE(parts);
    if (*k > MAX_ROW_PARTS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd parts, at most %d", name, *k, MAX_ROW_PARTS);
        return -1;
    }
    *total = 0;
    for (Py_ssize_t i = 0; i < *k; i++) {
        PyObject *p = PyTuple_GET_ITEM(parts, i);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2) {
            PyErr_Format(PyExc_TypeError, "%s: part %zd is not an (address, row bytes) pair", name, i);
            return -1;
        }
        if (unsigned_args(&PyTuple_GET_ITEM(p, 0), 2, 2, name, part[i]) < 0) return -1;
        *total += (size_t)part[i][1];
    }
    return 0;
}

static PyObject *crc32c_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "crc32c_rows takes a tuple of (address, row bytes) pairs, a row and a register");
        return NULL;
    }
    unsigned long long a[2];
    if (unsigned_args(args + 1, 2, 2, "crc32c_rows", a) < 0 || check_ready("crc32c_rows", a[1]) < 0) return NULL;
    unsigned long long part[MAX_ROW_PARTS][2];
    Py_ssize_t k;
    size_t total;
    if (row_parts(args[0], "crc32c_rows", part, &k, &total) < 0) return NULL;
    for (Py_ssize_t i = 0; i < k; i++) {
        if (part[i][1] && a[0] >= ((unsigned long long)SIZE_MAX - part[i][0]) / part[i][1]) {
            PyErr_Format(PyExc_OverflowError, "crc32c_rows: row %llu of part %zd overflows", a[0], i);
            return NULL;
        }
    }
    uint32_t reg = (uint32_t)a[1];
#if HAVE_FOLD
    PyThreadState *released = release_for(total);
    for (Py_ssize_t i = 0; i < k; i++)
        reg = only_fold((const uint8_t *)(uintptr_t)(part[i][0] + a[0] * part[i][1]), (size_t)part[i][1], reg);
    reacquire(released);
#else
    (void)total;
#endif
    return PyLong_FromUnsignedLong(reg);
}

/* gather_rows: a batch's samples from their shards' mappings in one call. */

#if HAVE_FOLD
/* Whether the page holding address p is in the page cache (mincore: reads nothing, never
 * waits); an error counts as not. */
static int resident(const uint8_t *p, uintptr_t page) {
    unsigned char v = 0;
    uintptr_t a = (uintptr_t)p & ~(page - 1);
    return mincore((void *)a, 1, (void *)&v) == 0 && (v & 1);
}

/* n bytes copied; with check, the register continued over them in the same pass. With
 * stream (a call writing stream_bytes or more) it goes through the fold either way, for
 * its stores past the caches (unchecked, its CRC is dropped: the fold runs while the loads
 * wait for memory). Into a batch the training loop has not held for a while, that made
 * warm unchecked reads 6-23% faster (docs/performance.md, "A batch in one compiled call"). */
static inline uint32_t copy_checked(uint8_t *dst, const uint8_t *src, size_t n, uint32_t reg, int check, int stream) {
    if (check) return copy_fold(dst, src, n, reg, stream);
    if (stream) (void)copy_fold(dst, src, n, reg, 1);
    else memcpy(dst, src, n);
    return reg;
}

/* n bytes of the pad value at d: with pattern (PAD_PATTERN bytes of the value) and a band
 * of PAD_PATTERN bytes or more, stored past the caches from it (copy_fold, its CRC
 * dropped), else memset. */
#define PAD_PATTERN 4096
static void pad_band(uint8_t *d, uint8_t pad, size_t n, const uint8_t *pattern) {
    if (!pattern || n < PAD_PATTERN) {
        memset(d, pad, n);
        return;
    }
    while (n) {
        size_t m = n < PAD_PATTERN ? n : PAD_PATTERN;
        (void)copy_fold(d, pattern, m, 0, 1);
        d += m;
        n -= m;
    }
}

/* A compact sample (docs/format/shard.md, "Compact images") restored into its image at
 * dst (c planes of height x width): the pad around the entry's rectangle, the region at
 * src (c x h x w bytes, stored back to back) inside it, each byte written once; with
 * check, the register continued over the region as stored. stream: a band of whole rows
 * is stored past the caches; pad_stream: the pad bands above and below it too
 * (pad_band). The pad streamed too made the torch loader's warm compact epochs 1.07x and
 * 1.10x faster at 1 and 2 reader threads (its batches rotate through memory that has left
 * the caches), and numpy read_batch into one reused batch, still in the caches, 0.92x:
 * the caller says which (gather_rows' flag bit 1; docs/performance.md). */
static uint32_t restore_compact(uint8_t *dst, const uint8_t *src, size_t c, size_t height, size_t width, size_t x,
                                size_t y, size_t w, size_t h, uint8_t pad, int check, uint32_t reg, int stream,
                                int pad_stream) {
    size_t plane = height * width, n = w * h;
    /* The pattern only where a band reaches pad_band's streaming size (small images
     * have none: no 4 KiB memset a sample for nothing). */
    size_t below = height - y - h, band = n ? (y > below ? y : below) * width : c * plane;
    uint8_t pattern_bytes[PAD_PATTERN];
    const uint8_t *pattern = NULL;
    if (pad_stream && band >= PAD_PATTERN) {
        memset(pattern_bytes, pad, PAD_PATTERN);
        pattern = pattern_bytes;
    }
    if (!n) {
        pad_band(dst, pad, c * plane, pattern);
        return reg;
    }
    for (size_t ch = 0; ch < c; ch++) {
        uint8_t *d = dst + ch * plane;
        const uint8_t *s = src + ch * n;
        pad_band(d, pad, y * width, pattern);
        if (w == width) {  /* a band of whole rows: one copy, checked as it goes */
            reg = copy_checked(d + y * width, s, n, reg, check, stream);
        } else {
            for (size_t row = 0; row < h; row++) {
                uint8_t *dr = d + (y + row) * width;
                memset(dr, pad, x);
                memcpy(dr + x, s + row * w, w);
                memset(dr + x + w, pad, width - x - w);
            }
            if (check) reg = only_fold(s, n, reg);  /* just copied: in cache */
        }
        pad_band(d + (y + h) * width, pad, (height - y - h) * width, pattern);
    }
    return reg;
}
#endif

PyDoc_STRVAR(gather_rows_doc,
             "gather_rows(jobs, n, params, status, crcs, probe[, claims]) -> skipped\n\n"
             "Read n samples of a batch from their shards' mappings: jobs is the address of an\n"
             "int64 array [n, 4 + S] (C order), a row per sample: the image's address in the\n"
             "mapping (a compact sample: the mapping's start), the address of its compact table\n"
             "entry (0: not compact), its row r in the batch, flags (bit 0: check it; bit 1: the\n"
             "batch has left the caches, a compact image's pad is stored past them too; bits 8-15:\n"
             "the pad value), then the addresses of its S small sections (boxes, mask, records,\n"
             "extras; those with bytes). params is (images, image bytes, channels, height,\n"
             "width, ((address, row bytes), ...) of the S small arrays): the batch's arrays'\n"
             "addresses, row r of each written. With probe 1, a sample whose image's last page\n"
             "is not in the page cache (mincore) is left alone: status[i] = 1 (status: a uint8\n"
             "array's address), else 0; probe 0 takes every page as cached, 2 none (tests).\n"
             "crcs[i] (a uint32 array's address) is set for each sample to check: its CRC-32C\n"
             "as the shard's table defines it (a compact one's entry, 16 bytes, and region as\n"
             "stored, else its image; then its small rows). Images are copied and checked in\n"
             "one pass where they can be. Returns the number left alone. With claims (the\n"
             "address of an int64, 0 at first, shared by the calls of several threads over the\n"
             "same n samples), each call takes the next sample not yet taken until none is\n"
             "left, so the calls end together however late each began; without it, the call\n"
             "reads all n in order. The GIL is released for the call; the caller owns every\n"
             "bound.");

static PyObject *gather_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 6 && nargs != 7) || !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 6 ||
        !PyTuple_Check(PyTuple_GET_ITEM(args[2], 5))) {
        PyErr_SetString(PyExc_TypeError, "gather_rows takes jobs, n, (images, image bytes, channels, height, width, "
                                         "small parts), status, crcs, probe and optional claims");
        return NULL;
    }
    unsigned long long a[2], st[4] = {0, 0, 0, 0}, p[5];
    if (unsigned_args(args, 2, 2, "gather_rows", a) < 0 ||
        unsigned_args(args + 3, nargs - 3, nargs - 3, "gather_rows", st) < 0 ||
        unsigned_args(&PyTuple_GET_ITEM(args[2], 0), 5, 5, "gather_rows params", p) < 0 ||
        check_ready("gather_rows", 0) < 0)
        return NULL;
    unsigned long long part[MAX_ROW_PARTS][2];
    Py_ssize_t ns;
    size_t small_total;
    if (row_parts(PyTuple_GET_ITEM(args[2], 5), "gather_rows small", part, &ns, &small_total) < 0) return NULL;
    size_t row_total = (size_t)p[1] + small_total;
    if (p[1] && (p[2] > (1u << 20) || p[3] > (1u << 20) || p[4] > (1u << 20) || p[2] * p[3] * p[4] > p[1])) {
        PyErr_Format(PyExc_ValueError, "gather_rows: %llu x %llu x %llu planes do not fit %llu image bytes", p[2], p[3],
                     p[4], p[1]);
        return NULL;
    }
    if (st[2] > 2) {
        PyErr_Format(PyExc_ValueError, "gather_rows: probe %llu, want 0, 1 or 2", st[2]);
        return NULL;
    }
    size_t n = (size_t)a[1], cols = 4 + (size_t)ns, skipped = 0;
#if HAVE_FOLD
    const int64_t *jobs = (const int64_t *)(uintptr_t)a[0];
    uint8_t *status = (uint8_t *)(uintptr_t)st[0];
    uint32_t *crcs = (uint32_t *)(uintptr_t)st[1];
    uint8_t *images = (uint8_t *)(uintptr_t)p[0];
    size_t img = (size_t)p[1], c = (size_t)p[2], height = (size_t)p[3], width = (size_t)p[4];
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* The n images (this call's, or those of the calls sharing claims), stream_bytes or
     * more: stored past the caches (a batch of megabytes is not read back from them), a
     * compact sample's region too, which alone may be less (384x216x3 is 243 KiB): that
     * made warm compact reads 15-25% faster. */
    int stream = img && n >= stream_bytes / img + (stream_bytes % img != 0), probe = (int)st[2];
    int64_t *claims = (int64_t *)(uintptr_t)st[3];
    PyThreadState *released = release_for(n * row_total);
    for (size_t next = 0;;) {
        /* The next sample: this call's own count, or the one the shared counter hands out. */
        size_t i = claims ? (size_t)__atomic_fetch_add(claims, 1, __ATOMIC_RELAXED) : next++;
        if (i >= n) break;
        const int64_t *job = jobs + i * cols;
        size_t r = (size_t)job[2];
        int check = (int)(job[3] & 1);
        uint8_t pad = (uint8_t)(job[3] >> 8), *dst = images + r * img;
        uint32_t reg = 0xFFFFFFFF;
        if (job[1]) {  /* compact: the entry is offset u64, x, y, w, h u16 (little-endian) */
            const uint8_t *e = (const uint8_t *)(uintptr_t)job[1];
            uint64_t off;
            uint16_t xywh[4];
            memcpy(&off, e, 8);
            memcpy(xywh, e + 8, 8);
            size_t region = c * xywh[2] * xywh[3];
            const uint8_t *src = (const uint8_t *)(uintptr_t)job[0] + off;
            if (probe == 2 || (probe && region && !resident(src + region - 1, page))) {
                status[i] = 1;
                skipped++;
                continue;
            }
            if (check) reg = only_fold(e, 16, reg);
            reg = restore_compact(dst, src, c, height, width, xywh[0], xywh[1], xywh[2], xywh[3], pad, check, reg,
                                  stream, stream && (job[3] & 2));
        } else if (img) {
            const uint8_t *src = (const uint8_t *)(uintptr_t)job[0];
            if (probe == 2 || (probe && !resident(src + img - 1, page))) {
                status[i] = 1;
                skipped++;
                continue;
            }
            reg = copy_checked(dst, src, img, reg, check, stream);
        }
        for (Py_ssize_t k = 0; k < ns; k++) {
            uint8_t *d = (uint8_t *)(uintptr_t)(part[k][0] + r * part[k][1]);
            const uint8_t *s = (const uint8_t *)(uintptr_t)job[4 + k];
            reg = copy_checked(d, s, (size_t)part[k][1], reg, check, 0);
        }
        status[i] = 0;
        if (check) crcs[i] = reg ^ 0xFFFFFFFF;
    }
    reacquire(released);
#else
    (void)n;
    (void)cols;
    (void)row_total;
#endif
    return PyLong_FromSize_t(skipped);
}

PyDoc_STRVAR(set_level_doc,
             "set_level(n) -> name\n\n"
             "Use the fold of level n (x86-64: 1 SSE4.2 and PCLMULQDQ, 2 AVX2 and VPCLMULQDQ;\n"
             "arm64: 1 CRC32 in one stream, 2 CRC32 in three streams joined with PMULL) from\n"
             "now on, n at most this CPU's (MAX_LEVEL); returns its name. For tests and\n"
             "benchmarks, which compare the levels on one CPU: not thread-safe.");

static PyObject *set_level(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long a[1];
    if (unsigned_args(args, nargs, 1, "set_level", a) < 0) return NULL;
    if (a[0] < 1 || a[0] > (unsigned long long)cpu_max_level) {
        PyErr_Format(PyExc_ValueError, "set_level: level %llu, this CPU and build run levels 1 to %d (MAX_LEVEL)", a[0], cpu_max_level);
        return NULL;
    }
    level = (int)a[0];
    return PyUnicode_FromString(level_names[level]);
}

PyDoc_STRVAR(set_stream_bytes_doc,
             "set_stream_bytes(n) -> previous n\n\n"
             "copy_crc32c calls that copy n bytes or more (256 KiB unless changed), and\n"
             "gather_rows calls whose images come to n bytes or more (their images, checked or\n"
             "not, and compact regions), store past the caches (MOVNTDQ, x86-64): a destination\n"
             "that large is not read back from them, and the stores skip reading each line\n"
             "first. For tests and benchmarks: not thread-safe.");

static PyObject *set_stream_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    unsigned long long a[1];
    if (unsigned_args(args, nargs, 1, "set_stream_bytes", a) < 0) return NULL;
    size_t before = stream_bytes;
    stream_bytes = a[0] > (unsigned long long)SIZE_MAX ? SIZE_MAX : (size_t)a[0];
    return PyLong_FromSize_t(before);
}

static PyMethodDef methods[] = {
    {"set_stream_bytes", (PyCFunction)(void (*)(void))set_stream_bytes, METH_FASTCALL, set_stream_bytes_doc},
    {"set_level", (PyCFunction)(void (*)(void))set_level, METH_FASTCALL, set_level_doc},
    {"copy_crc32c", (PyCFunction)(void (*)(void))copy_crc32c, METH_FASTCALL, copy_crc32c_doc},
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_FASTCALL, crc32c_doc},
    {"crc32c_rows", (PyCFunction)(void (*)(void))crc32c_rows, METH_FASTCALL, crc32c_rows_doc},
    {"gather_rows", (PyCFunction)(void (*)(void))gather_rows, METH_FASTCALL, gather_rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_copycrc",
    "A copy and its CRC-32C in one pass; see AVAILABLE and LEVEL.", -1, methods,
};

PyMODINIT_FUNC PyInit__copycrc(void) {
#if HAVE_FOLD
    fold_init();
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObject(m, "AVAILABLE", PyBool_FromLong(available)) < 0 ||
        PyModule_AddIntConstant(m, "MAX_LEVEL", cpu_max_level) < 0 ||
        PyModule_AddStringConstant(m, "LEVEL", level_names[level]) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
#endif /* COPYCRC_FOLD_ONLY */
