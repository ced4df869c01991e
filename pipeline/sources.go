package pipeline

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"warehouse-etl/config"
	"warehouse-etl/sources"
	"warehouse-etl/sources/registry"
)

// openSource returns the source the config names, opened by its kind's
// settings (package sources/registry); its warnings go to log. A source
// that holds files open implements io.Closer; the build closes it.
func openSource(cfg *config.Config, log *slog.Logger) (sources.Source, error) {
	if cfg.Source.Settings == nil {
		return nil, fmt.Errorf("source.kind %q: no such source", cfg.Source.Kind)
	}
	return cfg.Source.Settings.Open(cfg.Resolve(cfg.Source.Root), cfg.Resolve, log)
}

// emptySourceError is the configuration error of a source that yielded
// no samples at all: a root of another kind, an empty folder, a typo in
// source.root. A version of 0 samples is never what the config meant, and
// publishing one would move latest to it.
func (b *builder) emptySourceError() error {
	kind := b.src.Kind()
	root := b.cfg.Resolve(b.cfg.Source.Root)
	expected := "input samples"
	if k, ok := registry.Lookup(kind); ok {
		expected = k.Layout
	}
	return &ConfigError{fmt.Errorf("source %s at %s yielded no samples: a %s root holds %s; %s; check source.root and source.kind",
		kind, root, kind, expected, describeRoot(root, kind))}
}

// rootHints are the names that give another kind's root away.
var rootHints = []struct {
	kind  string
	match func(name string, dir bool) bool
}{
	{"yolo", func(n string, dir bool) bool { return !dir && (n == "data.yaml" || n == "data.yml") }},
	{"kdb", func(n string, dir bool) bool { return !dir && strings.HasSuffix(n, ".kdb") }},
	{"wshard", func(n string, dir bool) bool { return !dir && strings.HasSuffix(n, ".wshard") }},
}

// describeRoot says what root holds: that it is empty, or its first
// entries, and which kind it looks like when that is not kind.
func describeRoot(root, kind string) string {
	st, err := os.Stat(root)
	switch {
	case err != nil:
		return "it cannot be read: " + err.Error()
	case !st.IsDir():
		return fmt.Sprintf("it is a file of %d bytes", st.Size())
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return "it cannot be listed: " + err.Error()
	}
	if len(entries) == 0 {
		return "the folder is empty"
	}
	var names []string
	guess := ""
	for _, e := range entries {
		name := e.Name()
		for _, h := range rootHints {
			if guess == "" && h.kind != kind && h.match(name, e.IsDir()) {
				guess = h.kind
			}
		}
		if e.IsDir() {
			name += "/"
		}
		if len(names) < 6 {
			names = append(names, name)
		}
	}
	out := "it holds " + strings.Join(names, ", ")
	if len(entries) > len(names) {
		out += fmt.Sprintf(" and %d more", len(entries)-len(names))
	}
	if guess != "" {
		out += fmt.Sprintf(" (a %s dataset? set source.kind to %s)", guess, guess)
	}
	return out
}
