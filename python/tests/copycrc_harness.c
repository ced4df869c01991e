/* The folds of warehouse_etl/_copycrc.c without Python, for TestCopyCRCFolds
 * (cmd/warehouse-etl/copycrc_test.go): it builds this file for this machine and, with
 * a cross compiler, for arm64 (run under qemu-aarch64), and checks every answer
 * against Go's hash/crc32.
 *
 *   copycrc_harness LEVEL FILE < cases
 *
 * prints "max MAX_LEVEL NAME" (exit 3 after it when LEVEL is above MAX_LEVEL), then for
 * each case line "OFFSET LENGTH REGISTER DSTSHIFT" (decimal) of FILE's bytes: "COPY ONLY",
 * the registers after them from copy_fold (copying them to a buffer DSTSHIFT bytes past
 * a 64-byte aligned address) and only_fold. A copy that differs from the source, or a
 * byte written outside it, exits 1 with a message. */
#define COPYCRC_FOLD_ONLY
#include "../warehouse_etl/_copycrc.c"

#include <stdio.h>
#include <stdlib.h>

#define GUARD 64
#define GUARD_BYTE 0xA5

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
        size_t len = GUARD + (size_t)n + GUARD;
        uint8_t *buf = aligned_alloc(64, (len + 63) / 64 * 64);
        if (buf == NULL) return 2;
        memset(buf, GUARD_BYTE, len);
        uint8_t *dst = buf + GUARD + shift;
        uint32_t copied = copy_fold(dst, data + off, (size_t)n, (uint32_t)reg);
        uint32_t only = only_fold(data + off, (size_t)n, (uint32_t)reg);
        if (memcmp(dst, data + off, (size_t)n) != 0) {
            fprintf(stderr, "case %llu %llu: the copy differs from the source\n", off, n);
            return 1;
        }
        for (size_t i = 0; i < len; i++) {
            if ((buf + i < dst || buf + i >= dst + n) && buf[i] != GUARD_BYTE) {
                fprintf(stderr, "case %llu %llu: byte %td from the copy's start written\n", off, n, buf + i - dst);
                return 1;
            }
        }
        free(buf);
        printf("%u %u\n", copied, only);
    }
    return 0;
#endif
}
