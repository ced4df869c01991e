package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"warehouse-etl/internal/atomicfile"
	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
)

// Prometheus text exposition (format 0.0.4) of one build, for
// node_exporter's textfile collector: `build --metrics-file PATH`. Every
// sample carries the config path as the label `config`, so several nightly
// builds can write files side by side.

// lastSuccessMetric is the one value a failed build carries over from the
// file it replaces: when the last successful build was.
const lastSuccessMetric = "warehouse_etl_build_last_success_timestamp_seconds"

// buildMetrics is what one build run reports.
type buildMetrics struct {
	config   string
	start    time.Time
	end      time.Time
	exitCode int
	res      *pipeline.Result // nil when the build failed
	// rejected is the plan a failed threshold stopped (exit 3): its
	// counts are reported as a version's would be.
	rejected *pipeline.RejectedError
}

// counts are the sample counts to report: the version's, or those of the
// plan a threshold rejected; nil when there are none.
func (m buildMetrics) counts() *validate.Counts {
	switch {
	case m.res != nil && m.res.Manifest != nil:
		return &m.res.Manifest.Summary.Total
	case m.rejected != nil:
		return &m.rejected.Summary.Total
	}
	return nil
}

// writeBuildMetrics writes m to path atomically (a temporary file in the
// same directory, fsynced and renamed), keeping the previous file's last
// success time when this build did not succeed.
func writeBuildMetrics(path string, m buildMetrics) error {
	lastSuccess := previousLastSuccess(path, m.config)
	if m.exitCode == 0 {
		lastSuccess = float64(m.end.UnixMilli()) / 1000
	}
	var b strings.Builder
	label := `config="` + escapeLabel(m.config) + `"`
	gauge := func(name, help string, samples ...string) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
		for _, s := range samples {
			b.WriteString(name + s + "\n")
		}
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	outcome := "failed"
	if m.res != nil {
		outcome = m.res.Status.String()
	}
	gauge("warehouse_etl_build_last_exit_code", "Exit code of the last build run (0 built or up to date; see README for the others).",
		"{"+label+"} "+strconv.Itoa(m.exitCode))
	var outcomes []string
	for _, o := range []string{"built", "rebuilt", "up to date", "failed"} {
		v := "0"
		if o == outcome {
			v = "1"
		}
		outcomes = append(outcomes, `{`+label+`,outcome="`+strings.ReplaceAll(o, " ", "_")+`"} `+v)
	}
	gauge("warehouse_etl_build_outcome", "1 for the outcome of the last build run: built, rebuilt (WAREHOUSE_CLEAR=1), up_to_date or failed.", outcomes...)
	gauge("warehouse_etl_build_last_run_timestamp_seconds", "Unix time the last build run ended.", "{"+label+"} "+num(float64(m.end.UnixMilli())/1000))
	if lastSuccess > 0 {
		gauge(lastSuccessMetric, "Unix time the last successful build run (built or up to date) ended.", "{"+label+"} "+num(lastSuccess))
	}
	gauge("warehouse_etl_build_duration_seconds", "Wall-clock seconds of the last build run.", "{"+label+"} "+num(m.end.Sub(m.start).Seconds()))
	if r := m.res; r != nil && r.Report != nil {
		p := r.Report.Phases
		var phases []string
		for _, ph := range []struct {
			name string
			v    float64
		}{{"scan", p.Scan}, {"validate", p.Validate}, {"read", p.Read}, {"decode", p.Decode}, {"resize", p.Resize},
			{"normalize", p.Normalize}, {"write", p.Write}, {"publish", p.Publish}, {"total", p.Total}} {
			phases = append(phases, `{`+label+`,phase="`+ph.name+`"} `+num(ph.v))
		}
		gauge("warehouse_etl_build_phase_seconds", "Seconds per phase of the last build that wrote a version (read, decode, resize and normalize are summed over workers).", phases...)
		gauge("warehouse_etl_build_bytes_written", "Shard bytes the last build wrote.", "{"+label+"} "+strconv.FormatInt(r.Report.BytesWritten, 10))
		u := r.Report.Reuse
		gauge("warehouse_etl_build_images", "Images of the last build that wrote a version: reused (copied from a published version), decoded, fell_back (matched, but the old copy failed its CRC-32C: decoded, and counted in decoded too).",
			`{`+label+`,how="reused"} `+strconv.FormatInt(u.Reused, 10),
			`{`+label+`,how="decoded"} `+strconv.FormatInt(u.Decoded, 10),
			`{`+label+`,how="fell_back"} `+strconv.FormatInt(u.FellBack, 10))
		gauge("warehouse_etl_build_reuse_bytes_copied", "Image bytes the last build that wrote a version copied from published versions instead of decoding (in whole shards taken from them too).", "{"+label+"} "+strconv.FormatInt(u.BytesCopied, 10))
		gauge("warehouse_etl_build_reuse_shards_linked", "Shards the last build that wrote a version took whole from a published version (hard-linked, or copied where links are refused).", "{"+label+"} "+strconv.FormatInt(u.ShardsLinked, 10))
	}
	if t := m.counts(); t != nil {
		gauge("warehouse_etl_build_samples", "Samples of the version (or of the plan a failed threshold stopped) by status: input, kept, skipped, invalid, missing, empty.",
			`{`+label+`,status="input"} `+strconv.FormatInt(t.Total, 10),
			`{`+label+`,status="kept"} `+strconv.FormatInt(t.Kept, 10),
			`{`+label+`,status="skipped"} `+strconv.FormatInt(t.Skipped, 10),
			`{`+label+`,status="invalid"} `+strconv.FormatInt(t.Invalid, 10),
			`{`+label+`,status="missing"} `+strconv.FormatInt(t.MissingImage+t.MissingFile, 10),
			`{`+label+`,status="empty"} `+strconv.FormatInt(t.Empty, 10))
		var reasons []string
		for _, k := range slices.Sorted(maps.Keys(t.ByReason)) {
			reasons = append(reasons, `{`+label+`,reason="`+escapeLabel(string(k))+`"} `+strconv.FormatInt(t.ByReason[k], 10))
		}
		if len(reasons) > 0 {
			gauge("warehouse_etl_build_samples_by_reason", "Samples of the version (or of the plan a failed threshold stopped) per reason code (a sample with two reasons counts under both).", reasons...)
		}
	}
	return atomicfile.Write(path, []byte(b.String()), 0o644)
}

// escapeLabel escapes a label value for the text format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}

// previousLastSuccess reads the last success time for config from an
// earlier metrics file at path; 0 when there is none.
func previousLastSuccess(path, config string) float64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	prefix := lastSuccessMetric + `{config="` + escapeLabel(config) + `"} `
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				return x
			}
		}
	}
	return 0
}
