package pipeline

import (
	"fmt"
	"log/slog"

	"warehouse-etl/config"
	"warehouse-etl/sources"
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
