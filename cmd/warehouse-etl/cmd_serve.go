package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"warehouse-etl/viewer"
)

const serveSynopsis = `--tensor-warehouse PATH [--against OTHER] [--addr 127.0.0.1:8080] [--dataset-root DIR]

Serves a read-only web viewer of a warehouse version: an overview (version,
recipe, thresholds and how close each came, totals, runs, reason codes,
phase timings), a sample grid filterable by run, reason, class and
kept/rejected, one page per sample (image with boxes, labels, letterbox,
reasons, meta, extras; neighbouring frames and extras plots for episodes)
and, with --against, the drift report of diff with the samples that
appeared, disappeared or changed reasons.

It writes nothing, serves nothing outside the version directory and the
dataset root, and holds the version's readers lock while it runs, so gc
keeps the version. It binds to 127.0.0.1 unless --addr says otherwise;
SIGINT stops it (exit 0). docs/viewer.md has the pages.`

// serveOptions are serve's flags.
type serveOptions struct {
	Path        string
	Against     string
	Addr        string
	DatasetRoot string
	Log         logOptions
	// ready, when set, receives the address the server listens on (tests
	// pass --addr 127.0.0.1:0).
	ready func(addr string)
}

func (o *serveOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&o.Against, "against", "", "a second version to compare with (the drift page), same forms")
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&o.DatasetRoot, "dataset-root", "", "where rejected samples' source images are (default: the manifest's dataset_root when absolute)")
	o.Log.addFlags(fs)
}

// openViewer opens a version for serve and report with the logger their
// flags ask for.
func openViewer(stderr io.Writer, lo logOptions, path string, opts viewer.Options) (*viewer.Viewer, *slog.Logger, error) {
	log, err := lo.logger(stderr)
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = log
	v, err := viewer.Open(path, opts)
	return v, log, err
}

// runServe serves the viewer until ctx is cancelled, then returns nil:
// SIGINT is how a viewer is stopped, not a failure.
func runServe(ctx context.Context, opts serveOptions, s streams) error {
	if err := requireFlags(flagValue{"tensor-warehouse", opts.Path}); err != nil {
		return err
	}
	v, log, err := openViewer(s.stderr, opts.Log, opts.Path, viewer.Options{DatasetRoot: opts.DatasetRoot, Against: opts.Against})
	if err != nil {
		return err
	}
	defer v.Close()
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return usageError{fmt.Errorf("--addr: %w", err)}
	}
	srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		log.Warn("serving beyond this machine: anyone who can reach the address sees the warehouse (no authentication)", "addr", addr)
	}
	log.Info("serving", "url", "http://"+addr+"/", "version", v.Dir())
	fmt.Fprintf(s.stdout, "http://%s/\n", addr)
	if opts.ready != nil {
		opts.ready(addr)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
