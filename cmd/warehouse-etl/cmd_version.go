package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"runtime"

	"warehouse-etl/pipeline"
	"warehouse-etl/transforms"
)

func runVersion(ctx context.Context, env *environment, args []string) error {
	fs := newFlagSet(env, "version", "")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	turbo := transforms.TurboJPEGVersion()
	if turbo == "" {
		turbo = "not linked (pure-Go build; -tags turbojpeg links it)"
	}
	fmt.Fprintf(env.stdout, "%s\ngo: %s %s/%s\nbinary: %s\nlibjpeg-turbo: %s\ndecoder: %s\n",
		pipeline.CodeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH, linkage(), turbo, transforms.DecoderIdentity())
	return nil
}

// linkage says whether this executable is statically linked: an ELF file
// with no PT_INTERP program header needs no dynamic loader (and so no libc
// on the machine that runs it).
func linkage() string {
	exe, err := os.Executable()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f, err := elf.Open(exe)
	if err != nil {
		return "unknown (not ELF: " + err.Error() + ")"
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "dynamically linked (cgo; build with CGO_ENABLED=0 for a static binary)"
		}
	}
	return "static"
}
