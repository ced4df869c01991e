package viewer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"warehouse-etl/analytics"
	"warehouse-etl/analytics/records"
	"warehouse-etl/warehouse"
)

// sampleChange is one sample that appeared, disappeared or changed
// reasons between the baseline B and this version A. A sample is known
// by its run and frame (the key sources give it, stable across builds).
type sampleChange struct {
	Key                string
	Seq                int // in A; -1 for a sample only B has
	ReasonsA, ReasonsB string
	KeptA, KeptB       bool
	ImagePath          string
}

// maxChangesShown bounds each list of the diff page; the counts are exact.
const maxChangesShown = 200

// diffPage is the body of the drift page.
type diffPage struct {
	D                       *analytics.Diff
	Sections                []diffSection
	Appeared, Disappeared   []sampleChange
	Changed                 []sampleChange
	NAppeared, NDisappeared int
	NChanged                int
	Shown                   int
}

type diffSection struct {
	Name    string
	Counts  bool
	Metrics []analytics.Metric
}

// diffBody compares this version with the --against one, once.
func (v *Viewer) diffBody(ctx context.Context) (*diffPage, error) {
	if v.against == "" {
		return nil, errors.New("no --against version")
	}
	v.diffOnce.Do(func() { v.diff, v.diffErr = v.compare(context.WithoutCancel(ctx)) })
	return v.diff, v.diffErr
}

func (v *Viewer) compare(ctx context.Context) (*diffPage, error) {
	d, err := analytics.Compare(ctx, v.dir, v.against, v.limits)
	if err != nil {
		return nil, err
	}
	p := &diffPage{D: d, Shown: maxChangesShown}
	for _, s := range []string{analytics.SectionSamples, analytics.SectionReasons, analytics.SectionClasses, analytics.SectionBoxSize, analytics.SectionImage} {
		sec := diffSection{Name: s, Counts: s == analytics.SectionSamples || s == analytics.SectionReasons || s == analytics.SectionClasses}
		for _, m := range d.Metrics {
			if m.Section == s {
				sec.Metrics = append(sec.Metrics, m)
			}
		}
		p.Sections = append(p.Sections, sec)
	}
	if err := v.sampleChanges(p); err != nil {
		return nil, err
	}
	return p, nil
}

type sideSample struct {
	reasons string
	kept    bool
	seen    bool
	image   string
}

// sampleChanges reads B's samples.jsonl into a map by key (a few dozen
// bytes per sample), then streams A's against it.
func (v *Viewer) sampleChanges(p *diffPage) error {
	mb, err := warehouse.ReadManifest(v.against)
	if err != nil {
		return err
	}
	b := map[string]*sideSample{}
	var order []string
	rootB, err := os.OpenRoot(v.against)
	if err != nil {
		return err
	}
	defer rootB.Close()
	if err := eachSample(rootB, mb.Files.Samples, func(s *records.SampleLine) {
		k := sampleKey(s)
		if _, dup := b[k]; !dup {
			order = append(order, k)
		}
		b[k] = &sideSample{reasons: strings.Join(s.Reasons, " "), kept: s.Kept, image: s.ImagePath}
	}); err != nil {
		return fmt.Errorf("--against: %w", err)
	}
	err = eachSample(v.version, v.m.Files.Samples, func(s *records.SampleLine) {
		k := sampleKey(s)
		ra := strings.Join(s.Reasons, " ")
		old, ok := b[k]
		switch {
		case !ok:
			p.NAppeared++
			if len(p.Appeared) < maxChangesShown {
				p.Appeared = append(p.Appeared, sampleChange{Key: k, Seq: int(s.Seq), ReasonsA: ra, KeptA: s.Kept, ImagePath: s.ImagePath})
			}
		case old.seen:
		default:
			old.seen = true
			if old.reasons != ra || old.kept != s.Kept {
				p.NChanged++
				if len(p.Changed) < maxChangesShown {
					p.Changed = append(p.Changed, sampleChange{Key: k, Seq: int(s.Seq), ReasonsA: ra, ReasonsB: old.reasons, KeptA: s.Kept, KeptB: old.kept, ImagePath: s.ImagePath})
				}
			}
		}
	})
	if err != nil {
		return err
	}
	for _, k := range order {
		if old := b[k]; !old.seen {
			p.NDisappeared++
			if len(p.Disappeared) < maxChangesShown {
				p.Disappeared = append(p.Disappeared, sampleChange{Key: k, Seq: -1, ReasonsB: old.reasons, KeptB: old.kept, ImagePath: old.image})
			}
		}
	}
	return nil
}

// sampleKey names a sample across versions: its run and frame, and its
// image path (two labels of one frame differ by it).
func sampleKey(s *records.SampleLine) string {
	return fmt.Sprintf("%s#%d %s", s.Source, s.Frame, s.ImagePath)
}

// eachSample streams a samples.jsonl file.
func eachSample(root *os.Root, p string, fn func(*records.SampleLine)) error {
	f, err := root.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, records.MaxSampleLineBytes)
	for line := 1; ; line++ {
		raw, err := br.ReadSlice('\n')
		if err == io.EOF && len(raw) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s line %d: %w", p, line, err)
		}
		s, err := records.DecodeSampleLine(raw)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", p, line, err)
		}
		fn(s)
	}
}
