package pipeline

import (
	"fmt"
	"log/slog"
	"os"

	"warehouse-etl/config"
	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/coco"
	"warehouse-etl/sources/kdb"
	"warehouse-etl/sources/roverd"
	"warehouse-etl/sources/wshard"
	"warehouse-etl/sources/yolo"
)

// openSource returns the source the config names; its warnings go to log.
// Each source kind adds its case here and its name to config.SourceKinds.
// A source that holds files open implements io.Closer; the build closes it.
func openSource(cfg *config.Config, log *slog.Logger) (sources.Source, error) {
	root := cfg.Resolve(cfg.Source.Root)
	switch cfg.Source.Kind {
	case "capture":
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("source.root %s: not a readable directory", root)
		}
		return capture.New(root, capture.Options{LabelKeys: cfg.Source.LabelKeys})
	case "coco":
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("source.root %s: not a readable directory", root)
		}
		return coco.New(cfg.Resolve(cfg.Source.Annotations), root, coco.Options{Logger: log})
	case "yolo":
		return yolo.New(root, yolo.Options{Split: cfg.Source.Split, Logger: log})
	case "kdb":
		return kdb.New(root, kdb.Options{Camera: cfg.Source.Camera, Extras: cfg.Source.Extras, Logger: log})
	case "wshard":
		return wshard.New(root, wshard.Options{Camera: cfg.Source.Camera, Extras: cfg.Source.Extras,
			Boxes: cfg.Source.Boxes, BoxClasses: cfg.Source.BoxClasses, Logger: log})
	case "roverd":
		return roverd.New(root, roverd.Options{Camera: cfg.Source.Camera, Extras: cfg.Source.Extras, ToleranceMs: cfg.Source.ToleranceMs, IncludeUnderscore: cfg.Source.IncludeUnderscore, Logger: log})
	default:
		return nil, fmt.Errorf("source.kind %q: no such source", cfg.Source.Kind)
	}
}
