package main

import (
	"context"
	"errors"
	"fmt"
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
SIGINT stops it.`

// serveOptions are serve's flags.
type serveOptions struct {
	path        string
	against     string
	addr        string
	datasetRoot string
	log         logFlags
	// ready, when set, receives the address the server listens on (tests
	// pass --addr 127.0.0.1:0).
	ready func(addr string)
}

func serveCommand(ctx context.Context, env *environment, args []string) error {
	opts, err := parseServeFlags(env, args)
	if err != nil {
		return err
	}
	return runServe(ctx, env, opts)
}

// parseServeFlags fills serveOptions from the command line.
func parseServeFlags(env *environment, args []string) (serveOptions, error) {
	var opts serveOptions
	fs := newFlagSet(env, "serve", serveSynopsis)
	fs.StringVar(&opts.path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&opts.against, "against", "", "a second version to compare with (the drift page), same forms")
	fs.StringVar(&opts.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; port 0 picks a free one)")
	fs.StringVar(&opts.datasetRoot, "dataset-root", "", "where rejected samples' source images are (default: the manifest's dataset_root when absolute)")
	opts.log.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return opts, err
	}
	if opts.path == "" {
		fs.Usage()
		return opts, usageError{fmt.Errorf("--tensor-warehouse is required")}
	}
	return opts, nil
}

// openViewer opens a version for serve and report with the logger their
// flags ask for.
func openViewer(env *environment, lf logFlags, path string, opts viewer.Options) (*viewer.Viewer, *slog.Logger, error) {
	log, err := lf.logger(env.stderr)
	if err != nil {
		return nil, nil, err
	}
	opts.Logger = log
	v, err := viewer.Open(path, opts)
	return v, log, err
}

// runServe serves the viewer until ctx is cancelled.
func runServe(ctx context.Context, env *environment, opts serveOptions) error {
	v, log, err := openViewer(env, opts.log, opts.path, viewer.Options{DatasetRoot: opts.datasetRoot, Against: opts.against})
	if err != nil {
		return err
	}
	defer v.Close()
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return usageError{fmt.Errorf("--addr: %w", err)}
	}
	srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second}
	addr := ln.Addr().String()
	log.Info("serving", "url", "http://"+addr+"/", "version", v.Dir())
	fmt.Fprintf(env.stdout, "http://%s/\n", addr)
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
	// SIGINT is how a viewer is stopped: not a failure.
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
