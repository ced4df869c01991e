package pipeline

import (
	"fmt"
	"os"

	"warehouse-etl/config"
	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
)

// openSource returns the source the config names. Each source kind adds its
// case here and its name to config.SourceKinds.
func openSource(cfg *config.Config) (sources.Source, error) {
	root := cfg.Resolve(cfg.Source.Root)
	switch cfg.Source.Kind {
	case "capture":
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("source.root %s: not a readable directory", root)
		}
		return capture.New(root, capture.Options{LabelKeys: cfg.Source.LabelKeys})
	default:
		return nil, fmt.Errorf("source.kind %q: no such source", cfg.Source.Kind)
	}
}
