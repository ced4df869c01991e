/* The folds of warehouse_etl/_copycrc.c without Python, for TestCopyCRCFolds
 * (cmd/warehouse-etl/copycrc_test.go): it builds this file for this machine and, with
 * a cross compiler, for arm64 (run under qemu-aarch64), and checks every answer
 * against Go's hash/crc32.
 *
 *   copycrc_harness LEVEL FILE < cases
 *
 * prints "max MAX_LEVEL NAME" (exit 3 after it when LEVEL is above MAX_LEVEL), then for
 * each case line "OFFSET LENGTH REGISTER DSTSHIFT" (decimal) of FILE's bytes: "COPY
 * STREAM ONLY", the registers after them from copy_fold (copying them to a buffer
 * DSTSHIFT bytes past a 64-byte aligned address), from copy_fold with cache-bypassing
 * stores, and from only_fold. A copy that differs from the source, or a byte written
 * outside it, exits 1 with a message. */
#define COPYCRC_FOLD_ONLY
#include "../warehouse_etl/_copycrc.c"

#include <stdio.h>
#include <stdlib.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

#if HAVE_FOLD
/* copy_fold of src[0:n] from reg into a buffer shift bytes past a 64-byte aligned
 * address, its register in *out; 1 (with a message) when the copy differs from src or a
 * byte around it was written. */
static int copy_case(const uint8_t *src, size_t n, uint32_t reg, size_t shift, int stream, uint32_t *out) {
    size_t len = GUARD + n + GUARD;
    uint8_t *buf = aligned_alloc(64, (len + 63) / 64 * 64);
    if (buf == NULL) return 1;
    memset(buf, GUARD_BYTE, len);
    uint8_t *dst = buf + GUARD + shift;
    *out = copy_fold(dst, src, n, reg, stream);
    int bad = memcmp(dst, src, n) != 0;
    if (bad) fprintf(stderr, "the copy differs from the source: ");
    for (size_t i = 0; i < len && !bad; i++) {
        if ((buf + i < dst || buf + i >= dst + n) && buf[i] != GUARD_BYTE) {
            fprintf(stderr, "byte %td from the copy's start written: ", buf + i - dst);
            bad = 1;
        }
    }
    free(buf);
    return bad;
}
#endif

int main(int argc, char **argv) {
#if !HAVE_FOLD
    (void)argc;
    (void)argv;
    printf("max 0 none\n");
    return 3;
#else
    if (argc != 3) {
        fprintf(stderr, "usage: copycrc_harness LEVEL FILE < cases\n");
        return 2;
    }
    fold_init();
    int want = atoi(argv[1]);
    printf("max %d %s\n", cpu_max_level, level_names[cpu_max_level]);
    if (want < 1 || want > cpu_max_level) return 3;
    level = want;

    FILE *f = fopen(argv[2], "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        perror(argv[2]);
        return 2;
    }
    long size = ftell(f);
    uint8_t *data = malloc((size_t)size + 1);
    rewind(f);
    if (data == NULL || fread(data, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "%s: short read\n", argv[2]);
        return 2;
    }
    fclose(f);

    unsigned long long off, n, reg, shift;
    while (scanf("%llu %llu %llu %llu", &off, &n, &reg, &shift) == 4) {
        if (off + n > (unsigned long long)size || reg > 0xFFFFFFFFull || shift >= GUARD) {
            fprintf(stderr, "case %llu %llu %llu %llu: out of range\n", off, n, reg, shift);
            return 2;
        }
        uint32_t copied[2];
        for (int stream = 0; stream < 2; stream++) {
            if (copy_case(data + off, (size_t)n, (uint32_t)reg, (size_t)shift, stream, &copied[stream]) != 0) {
                fprintf(stderr, "case %llu %llu %llu %llu, stream %d\n", off, n, reg, shift, stream);
                return 1;
            }
        }
        printf("%u %u %u\n", copied[0], copied[1], only_fold(data + off, (size_t)n, (uint32_t)reg));
    }
    return 0;
#endif
}
