package main

import (
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"runtime"

	"warehouse-etl/pipeline"
	"warehouse-etl/transforms"
)

// versionOptions are version's flags: none.
type versionOptions struct{}

func (*versionOptions) addFlags(*flag.FlagSet) {}

// runVersion prints the code version and what the binary was built with.
func runVersion(ctx context.Context, opts versionOptions, s streams) error {
	turbo := transforms.TurboJPEGVersion()
	if turbo == "" {
		turbo = "not linked (pure-Go build; -tags turbojpeg links it)"
	}
	fmt.Fprintf(s.stdout, "%s\ngo: %s %s/%s\nbinary: %s\nlibjpeg-turbo: %s\ndecoder: %s\n",
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
