package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"warehouse-etl/config"
	"warehouse-etl/objstore"
	"warehouse-etl/pipeline"
	"warehouse-etl/warehouse"
)

const loadSynopsis = `(--tensor-warehouse PATH | --config FILE) [flags]

Reads a warehouse the way training does (mmap, shuffled batches for one
rank, prefetched into contiguous buffers) and reports samples/s, GB/s,
shard load times and peak memory. Each sample is checked against its
shard's CRC-32C on its first read, as training's reads are
(--recheck-samples: on every read; --no-verify-samples: never, to measure
the reads alone); a warehouse built before per-sample checksums is read
unchecked and says so. With only --config it reads the version
that config builds. --allow-live --config FILE decodes samples from the
source on the fly when that version was never built: a slow development
fallback, announced loudly; a warehouse that exists but is damaged is an
error, never a reason to fall back.

--start-position P starts the first epoch at global position P of its order,
as a job resumed there with this --world does (docs/format/reading.md,
"Resuming"); --mix PATH=WEIGHT (repeated, instead of --tensor-warehouse)
reads a mixture of warehouses ("Mixtures"); --indices FILE writes the sample
indices of every batch handed out.`

// loadReport is what load prints (--json) and what bench/load.sh reads.
type loadReport struct {
	Dir       string `json:"dir"`
	Live      bool   `json:"live"`
	Shuffle   string `json:"shuffle"`
	Remainder string `json:"remainder"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	BatchSize int    `json:"batch_size"`
	Epochs    int    `json:"epochs"`
	// StartPosition is where the first epoch started (reading.md,
	// "Resuming"); Mix the mixture read, if any, with its quotas.
	StartPosition int       `json:"start_position"`
	Mix           []mixPart `json:"mix,omitempty"`
	MixQuotas     []int     `json:"mix_quotas,omitempty"`
	Batches       int       `json:"batches"`
	Samples       int64     `json:"samples"`
	Repeats       int64     `json:"repeats"`
	Bytes         int64     `json:"bytes"` // images + boxes + masks handed out
	Seconds       float64   `json:"seconds"`
	// Epochs after the first: the steady state of a training job, whose
	// first epoch also pays for faulting in its batch buffers and
	// opening its shards. Zero with one epoch.
	LaterSeconds     float64              `json:"later_epochs_seconds"`
	LaterSamples     int64                `json:"later_epochs_samples"`
	LaterBytes       int64                `json:"later_epochs_bytes"`
	LaterGBPerSecond float64              `json:"later_epochs_gb_per_second"`
	SamplesPerSecond float64              `json:"samples_per_second"`
	GBPerSecond      float64              `json:"gb_per_second"`
	Shards           *warehouse.LoadStats `json:"shards,omitempty"`
	LiveFailed       int64                `json:"live_failed,omitempty"`
	Memory           memoryReport         `json:"memory"`
	// SampleChecksums says whether the shards carry per-sample CRC-32Cs
	// (sampleChecksumsText); VerifySamples how load checked them: "first
	// read", "every read" or "off"; SamplesVerified counts the checks that
	// passed. Absent for a live source.
	SampleChecksums string `json:"sample_checksums,omitempty"`
	VerifySamples   string `json:"verify_samples,omitempty"`
	SamplesVerified int64  `json:"samples_verified"`
}

// defaultLoadBatch is load's --batch when none is given.
const defaultLoadBatch = 32

// loadOptions are what load runs with: its flags and its environment.
type loadOptions struct {
	Path             string
	Config           string
	AllowLive        bool
	Batch            int
	Epochs           int
	FirstEpoch       int
	Rank             int
	World            int
	Shuffle          string
	Seed             uint64
	Remainder        string
	Prefetch         int
	ReadAhead        int
	Workers          int
	MaxBatches       int
	StartPosition    int
	Mix              mixFlag
	EpochSamples     int
	Indices          string
	VerifyChecksums  bool
	NoVerifySamples  bool
	RecheckSamples   bool
	IgnoreThresholds bool
	JSON             bool
	Log              logOptions

	// Getenv reads the threshold overrides (WAREHOUSE_MAX_*,
	// WAREHOUSE_*_ACTION) a live source applies, as a build does.
	Getenv func(string) string
}

// defaultReadAhead is load's --read-ahead: advice for the two batches
// after those being filled, once the reads turn cold (warehouse/readahead.go).
const defaultReadAhead = 2

func (o *loadOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.Path, "tensor-warehouse", "", "warehouse version directory, or output root with a latest pointer")
	fs.StringVar(&o.Config, "config", "", "build config: read the version it builds (and the source, with --allow-live)")
	fs.BoolVar(&o.AllowLive, "allow-live", false, "decode from the config's source when the version was never built (development only)")
	fs.IntVar(&o.Batch, "batch", defaultLoadBatch, "samples per batch")
	fs.IntVar(&o.Epochs, "epochs", 1, "epochs to read")
	fs.IntVar(&o.FirstEpoch, "first-epoch", 0, "epoch number of the first epoch (the order depends on it)")
	fs.IntVar(&o.Rank, "rank", 0, "this process's data-parallel rank")
	fs.IntVar(&o.World, "world", 1, "data-parallel world size")
	fs.StringVar(&o.Shuffle, "shuffle", "global", "sample order per epoch: none (sequential), shard (shards and samples within them), global")
	fs.Uint64Var(&o.Seed, "seed", 0, "shuffle seed; every rank must use the same")
	fs.StringVar(&o.Remainder, "remainder", "drop", "samples that do not fill a batch on every rank: drop, or pad by wrapping around")
	fs.IntVar(&o.Prefetch, "prefetch", 2, "batches filled ahead")
	fs.IntVar(&o.ReadAhead, "read-ahead", defaultReadAhead, "batches past those being filled whose shard bytes are advised to the kernel (posix_fadvise WILLNEED) once 1 in 8 of the samples read are not in the page cache; 0 = off")
	fs.IntVar(&o.Workers, "workers", 0, "goroutines filling batches, each batch split among them; 0 = min(CPUs, 8)")
	fs.IntVar(&o.MaxBatches, "max-batches", 0, "stop each epoch after this many batches; 0 = all")
	fs.IntVar(&o.StartPosition, "start-position", 0, "start the first epoch at this global position of its order, as a resumed job (any --world; reading.md \"Resuming\")")
	fs.Var(&o.Mix, "mix", "PATH=WEIGHT: read a mixture of warehouses of one layout (repeat; instead of --tensor-warehouse)")
	fs.IntVar(&o.EpochSamples, "epoch-samples", 0, "a mixture's epoch length in samples; 0 = the warehouses' samples summed")
	fs.StringVar(&o.Indices, "indices", "", "write each batch's sample indices to this file: \"epoch batch i... rREPEATS\" per line")
	fs.BoolVar(&o.VerifyChecksums, "verify-checksums", false, "sha256 each shard when first mapped and refuse a mismatch")
	fs.BoolVar(&o.NoVerifySamples, "no-verify-samples", false, "hand samples out without checking their per-sample CRC-32C (benchmarks of the reads alone)")
	fs.BoolVar(&o.RecheckSamples, "recheck-samples", false, "check each sample's CRC-32C on every read, not only on its first")
	fs.BoolVar(&o.IgnoreThresholds, "ignore-thresholds", false, "read a warehouse whose summary exceeds its thresholds")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON on stdout")
	o.Log.addFlags(fs)
}

func (o *loadOptions) readEnv(getenv func(string) string) { o.Getenv = getenv }

// runLoad reads the warehouse at opts.Path (or the version opts.Config
// builds, or with opts.AllowLive its source) as training does and prints
// what the reads cost.
func runLoad(ctx context.Context, opts loadOptions, s streams) error {
	shuffle, err := warehouse.ParseShuffle(opts.Shuffle)
	if err != nil {
		return usageError{err}
	}
	remainder, err := warehouse.ParseRemainder(opts.Remainder)
	if err != nil {
		return usageError{err}
	}
	if len(opts.Mix) > 0 {
		if opts.Path != "" || opts.Config != "" || opts.AllowLive {
			return usageError{errors.New("--mix names the warehouses: give it without --tensor-warehouse, --config and --allow-live")}
		}
	} else if err := requireOneFlag(flagValue{"tensor-warehouse", opts.Path}, flagValue{"config", opts.Config}); err != nil {
		return err
	} else if opts.EpochSamples != 0 {
		return usageError{errors.New("--epoch-samples is a mixture's epoch length: give --mix")}
	}
	if opts.StartPosition < 0 {
		return usageError{fmt.Errorf("--start-position %d: must be >= 0", opts.StartPosition)}
	}
	if opts.AllowLive && opts.Config == "" {
		return usageError{errors.New("--allow-live needs --config: live decoding reads the source and transforms the config names")}
	}
	if opts.Epochs < 1 {
		return usageError{fmt.Errorf("--epochs %d: must be >= 1", opts.Epochs)}
	}
	if opts.NoVerifySamples && opts.RecheckSamples {
		return usageError{errors.New("--no-verify-samples and --recheck-samples contradict each other")}
	}
	log, err := opts.Log.logger(s.stderr)
	if err != nil {
		return err
	}
	path := opts.Path
	var cfg *config.Config
	if opts.Config != "" {
		if cfg, err = config.Load(opts.Config); err != nil {
			return usageError{err}
		}
		if path == "" {
			if path, err = pipeline.VersionDir(cfg); err != nil {
				return err
			}
			if objstore.IsLocation(cfg.OutputRoot) {
				// The config's version in the object store (s3.go).
				l, err := openS3Version(ctx, opts.Getenv, strings.TrimSuffix(cfg.OutputRoot, "/")+"/"+filepath.Base(path))
				if err != nil {
					return err
				}
				defer l.Close()
				path = l.Dir
			}
		}
	}
	mem := startMemorySampler()

	var (
		src    warehouse.BatchSource
		reader *warehouse.Reader
		live   *pipeline.Live
		rep    = loadReport{Shuffle: shuffle.String(), Remainder: remainder.String(), Rank: opts.Rank, WorldSize: opts.World, BatchSize: opts.Batch, Epochs: opts.Epochs,
			StartPosition: opts.StartPosition}
	)
	dir, resolveErr := warehouse.ResolveDir(path)
	switch {
	case len(opts.Mix) > 0:
		m, readers, err := openMixture(opts.Mix, opts.EpochSamples, func(dir string) (*warehouse.Reader, error) {
			return warehouse.Open(dir, warehouse.OpenOptions{Logger: log, IgnoreThresholds: opts.IgnoreThresholds, VerifyChecksums: opts.VerifyChecksums,
				SkipSampleChecksums: opts.NoVerifySamples, RecheckSamples: opts.RecheckSamples})
		})
		for _, r := range readers {
			defer r.Close()
		}
		if err != nil {
			return err
		}
		src, rep.Dir, rep.Mix, rep.MixQuotas = m, "mixture "+opts.Mix.String(), opts.Mix, m.Quotas()
	case resolveErr == nil:
		reader, err = warehouse.Open(dir, warehouse.OpenOptions{Logger: log, IgnoreThresholds: opts.IgnoreThresholds, VerifyChecksums: opts.VerifyChecksums,
			SkipSampleChecksums: opts.NoVerifySamples, RecheckSamples: opts.RecheckSamples})
		if err != nil {
			return err
		}
		defer reader.Close()
		src, rep.Dir = reader, dir
		rep.SampleChecksums = sampleChecksumsText(reader.SampleChecksums())
		switch verify, everyRead := reader.VerifiesSamples(); {
		case !verify:
			rep.VerifySamples = "off"
		case everyRead:
			rep.VerifySamples = "every read"
		default:
			rep.VerifySamples = "first read"
		}
	case opts.AllowLive:
		fmt.Fprintf(s.stderr, "\n%s\nWARNING: no warehouse at %s.\nWARNING: LIVE DECODING from %s: every sample is decoded, resized and\nWARNING: normalized on every read. This is a development fallback, far slower than a\nWARNING: warehouse and unchecked by verify. Build it: warehouse-etl build --config %s\n%s\n\n",
			strings.Repeat("!", 78), path, cfg.Resolve(cfg.Source.Root), opts.Config, strings.Repeat("!", 78))
		if cfg.Thresholds, err = thresholdsFromEnv(cfg.Thresholds, opts.Getenv); err != nil {
			return usageError{err}
		}
		live, err = pipeline.OpenLive(ctx, pipeline.LiveOptions{Options: pipeline.Options{Config: cfg, Logger: log}, IgnoreThresholds: opts.IgnoreThresholds})
		if err != nil {
			return err
		}
		defer live.Close()
		if opts.ReadAhead > 0 && opts.ReadAhead != defaultReadAhead { // asked for, not the default
			log.Warn("--read-ahead does nothing with live decoding: there are no shard files to advise", "read_ahead", opts.ReadAhead)
		}
		src, rep.Dir, rep.Live = live, path, true
	default:
		hint := "build it with `warehouse-etl build --config FILE`"
		if opts.Config != "" {
			hint = fmt.Sprintf("build it with `warehouse-etl build --config %s`, or pass --allow-live to decode from the source (development only)", opts.Config)
		}
		return fmt.Errorf("no warehouse to load: %v; %s", resolveErr, hint)
	}

	indices, err := createIndices(opts.Indices)
	if err != nil {
		return err
	}
	defer indices.close()
	start := time.Now()
	var first loadReport
	for e := range opts.Epochs {
		bopts := warehouse.BatchOptions{BatchSize: opts.Batch, Seed: opts.Seed, Epoch: opts.FirstEpoch + e, Rank: opts.Rank, WorldSize: opts.World,
			Shuffle: shuffle, Remainder: remainder, Prefetch: opts.Prefetch, Workers: opts.Workers, ReadAhead: opts.ReadAhead}
		if e == 0 {
			bopts.StartPosition = opts.StartPosition
		}
		if err := loadEpoch(ctx, src, bopts, opts.MaxBatches, &rep, log, indices); err != nil {
			return err
		}
		if e == 0 {
			first = rep
			first.Seconds = time.Since(start).Seconds()
		}
	}
	rep.Seconds = time.Since(start).Seconds()
	if err := indices.close(); err != nil {
		return err
	}
	if opts.Epochs > 1 {
		rep.LaterSeconds, rep.LaterSamples, rep.LaterBytes = rep.Seconds-first.Seconds, rep.Samples-first.Samples, rep.Bytes-first.Bytes
		if rep.LaterSeconds > 0 {
			rep.LaterGBPerSecond = float64(rep.LaterBytes) / 1e9 / rep.LaterSeconds
		}
	}
	if rep.Seconds > 0 {
		rep.SamplesPerSecond = float64(rep.Samples) / rep.Seconds
		rep.GBPerSecond = float64(rep.Bytes) / 1e9 / rep.Seconds
	}
	if reader != nil {
		st := reader.Stats()
		rep.Shards = &st
		rep.SamplesVerified = reader.SamplesVerified()
		log.Info("shard load summary", "stats", st, "samples_verified", rep.SamplesVerified)
	}
	if live != nil {
		rep.LiveFailed = live.Failed()
	}
	rep.Memory = mem.stop()
	if opts.JSON {
		enc := json.NewEncoder(s.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printLoad(s.stdout, &rep)
	return nil
}

// loadEpoch reads one epoch's batches for this rank.
func loadEpoch(ctx context.Context, src warehouse.BatchSource, opts warehouse.BatchOptions, maxBatches int, rep *loadReport, log *slog.Logger, indices *indicesWriter) error {
	t0 := time.Now()
	it, err := warehouse.NewBatchIterator(ctx, src, opts)
	if err != nil {
		return usageError{err}
	}
	defer it.Close()
	var batches int
	var samples int64
	for maxBatches == 0 || batches < maxBatches {
		b, err := it.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		batches++
		indices.batch(b)
		samples += int64(b.Len())
		rep.Repeats += int64(b.Repeats)
		rep.Bytes += int64(len(b.Images) + len(b.Boxes) + len(b.Mask))
	}
	rep.Batches += batches
	rep.Samples += samples
	secs := time.Since(t0).Seconds()
	log.Info("epoch read", "epoch", opts.Epoch, "batches", batches, "samples", samples, "seconds", secs,
		"samples_per_second", float64(samples)/max(secs, 1e-9))
	return nil
}

func printLoad(w io.Writer, r *loadReport) {
	what := "warehouse"
	if r.Live {
		what = "LIVE (decoded from the source)"
	}
	fmt.Fprintf(w, "load %s %s\n", what, r.Dir)
	fmt.Fprintf(w, "  rank %d of %d, batch %d, shuffle %s, remainder %s, %d epoch(s)\n", r.Rank, r.WorldSize, r.BatchSize, r.Shuffle, r.Remainder, r.Epochs)
	fmt.Fprintf(w, "  %d batches, %d samples (%d padding repeats), %.1f MB in %.3fs\n", r.Batches, r.Samples, r.Repeats, float64(r.Bytes)/1e6, r.Seconds)
	fmt.Fprintf(w, "  %.1f samples/s, %.3f GB/s\n", r.SamplesPerSecond, r.GBPerSecond)
	if r.LaterSeconds > 0 {
		fmt.Fprintf(w, "  epochs after the first: %.1f samples/s, %.3f GB/s (the first also faults in the batch buffers)\n",
			float64(r.LaterSamples)/r.LaterSeconds, r.LaterGBPerSecond)
	}
	if r.Shards != nil {
		fmt.Fprintf(w, "  %s\n", r.Shards.String())
	}
	if r.SampleChecksums != "" {
		how := fmt.Sprintf("checked on %s: %d checks passed", r.VerifySamples, r.SamplesVerified)
		switch {
		case r.SampleChecksums == sampleChecksumsNone:
			how = "samples read unchecked"
		case r.VerifySamples == "off":
			how = "not checked (--no-verify-samples)"
		}
		fmt.Fprintf(w, "  per-sample checksums: %s, %s\n", r.SampleChecksums, how)
	}
	if r.Live {
		fmt.Fprintf(w, "  live samples that failed to decode (served empty): %d\n", r.LiveFailed)
	}
	if m := r.Memory; m.PeakRSS > 0 {
		fmt.Fprintf(w, "  peak RSS %.1f MB (anonymous peak %.1f MB; file-backed pages at the end %.1f MB, page cache shared with other readers)\n",
			float64(m.PeakRSS)/1e6, float64(m.PeakAnon)/1e6, float64(m.FileRSS)/1e6)
	}
}

// sampleChecksumsNone is sampleChecksumsText for a warehouse none of whose
// shards has per-sample CRC-32Cs.
const sampleChecksumsNone = "none (older warehouse)"

// sampleChecksumsText says, for inspect and load, whether a warehouse's
// shards carry per-sample CRC-32Cs: "yes", "none (older warehouse)", or
// "partial (k of n shards)".
func sampleChecksumsText(checked, shards int) string {
	switch checked {
	case shards:
		return "yes"
	case 0:
		return sampleChecksumsNone
	}
	return fmt.Sprintf("partial (%d of %d shards)", checked, shards)
}

// memoryReport is the process's memory as /proc/self/status tells it.
// PeakRSS (VmHWM) counts the mapped shard pages the process touched: they
// are page cache, shared and reclaimable, so PeakAnon (sampled RssAnon) is
// the number that grows with batch size and prefetch, not with the
// warehouse.
type memoryReport struct {
	PeakRSS  int64 `json:"peak_rss_bytes"`
	PeakAnon int64 `json:"peak_anon_bytes"`
	FileRSS  int64 `json:"file_rss_bytes"`
}

type memorySampler struct {
	mu   sync.Mutex
	peak int64
	done chan struct{}
	wg   sync.WaitGroup
}

// startMemorySampler samples RssAnon every 20ms until stop; the kernel
// keeps no peak of it.
func startMemorySampler() *memorySampler {
	m := &memorySampler{done: make(chan struct{})}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			m.sample()
			select {
			case <-m.done:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memorySampler) sample() {
	if st, ok := procStatus(); ok {
		m.mu.Lock()
		m.peak = max(m.peak, st["RssAnon"])
		m.mu.Unlock()
	}
}

func (m *memorySampler) stop() memoryReport {
	close(m.done)
	m.wg.Wait()
	m.sample()
	st, _ := procStatus()
	return memoryReport{PeakRSS: st["VmHWM"], PeakAnon: m.peak, FileRSS: st["RssFile"]}
}

// procStatus reads the kB fields of /proc/self/status, in bytes; ok is
// false where there is no such file.
func procStatus() (map[string]int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		fields := strings.Fields(rest)
		if !ok || len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[name] = n << 10
		}
	}
	return out, true
}
