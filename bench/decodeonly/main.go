// Command decodeonly times the build's image decoder alone over a dataset's
// frames, single-threaded, at the scale a build of the given letterbox size
// decodes them (JPEG: DCT-scaled), for bench/run.sh's build/decode ratio.
// Built with and without -tags turbojpeg, it times jpegdec or
// libjpeg-turbo. It prints one line: frames, decode seconds (CPU time of
// the process, user+system), the decoded size of the first frame.
//
//	go run ./bench/decodeonly --size 384 --repeat 3 FRAME...
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"warehouse-etl/dtype"
	"warehouse-etl/transforms"
)

func main() {
	size := flag.Int("size", 640, "letterbox target side")
	repeat := flag.Int("repeat", 1, "decode every frame this many times")
	flag.Parse()
	spec := transforms.Spec{Width: *size, Height: *size, Mode: transforms.Letterbox, DType: dtype.F16}
	tr, err := transforms.NewTransformer(spec)
	if err != nil {
		fail(err)
	}
	frames := make([][]byte, 0, flag.NArg())
	for _, p := range flag.Args() {
		b, err := os.ReadFile(p)
		if err != nil {
			fail(err)
		}
		frames = append(frames, b)
	}
	if len(frames) == 0 {
		fail(fmt.Errorf("no frames"))
	}
	w, h, err := tr.Decode(frames[0]) // warm-up: buffers sized
	if err != nil {
		fail(err)
	}
	c0 := cpu()
	for range *repeat {
		for _, f := range frames {
			if _, _, err := tr.Decode(f); err != nil {
				fail(err)
			}
		}
	}
	secs := (cpu() - c0).Seconds()
	fmt.Printf("%d %.4f %dx%d %s\n", len(frames)**repeat, secs, w, h, transforms.DecoderIdentity())
}

func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "decodeonly:", err)
	os.Exit(1)
}
