package analytics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"warehouse-etl/analytics/records"
	"warehouse-etl/warehouse"
)

// boxType is one element of samples.parquet's boxes column: a box of the
// shard, normalized to [0,1] in target space, with its class.
var boxType = arrow.StructOf(
	int64Field("class_index", false),
	stringField("class_name", false),
	float32Field("x_min"), float32Field("y_min"), float32Field("x_max"), float32Field("y_max"),
)

// samplesSchema is samples.parquet, in docs/format/parquet.md's order.
var samplesSchema = arrow.NewSchema([]arrow.Field{
	stringField("version", false),
	int64Field("seq", false),
	stringField("source", false),
	int64Field("source_index", false),
	int64Field("frame", false),
	int64Field("unix_time_ns", false),
	float64Field("sim_time", false),
	stringField("label_path", false),
	stringField("image_path", false),
	int64Field("width", false),
	int64Field("height", false),
	int64Field("kept", false),
	listField("reasons", arrow.BinaryTypes.String),
	stringField("error", true),
	int64Field("index", true),
	stringField("shard", true),
	int64Field("shard_index", true),
	int64Field("box_count", false),
	int64Field("boxes_dropped", true),
	listField("class_index", arrow.PrimitiveTypes.Int64),
	listField("boxes", boxType),
	structField("letterbox", true,
		float64Field("scale_x", false), float64Field("scale_y", false),
		int64Field("resized_width", false), int64Field("resized_height", false),
		int64Field("pad_x", false), int64Field("pad_y", false),
	),
	stringField("detail", true),
}, nil)

// samplesBuilders are the typed column builders of samplesSchema.
type samplesBuilders struct {
	version, source, labelPath, imagePath, errorMsg, shard, detail  *array.StringBuilder
	seq, sourceIndex, frame, unixTimeNs, width, height, kept, index *array.Int64Builder
	shardIndex, boxCount, boxesDropped                              *array.Int64Builder
	simTime                                                         *array.Float64Builder
	reasons, classIndex, boxes                                      *array.ListBuilder
	reasonValues                                                    *array.StringBuilder
	classIndexValues                                                *array.Int64Builder
	box                                                             *array.StructBuilder
	boxClass                                                        *array.Int64Builder
	boxClassName                                                    *array.StringBuilder
	boxXMin, boxYMin, boxXMax, boxYMax                              *array.Float32Builder
	letterbox                                                       *array.StructBuilder
	lbScaleX, lbScaleY                                              *array.Float64Builder
	lbResizedWidth, lbResizedHeight, lbPadX, lbPadY                 *array.Int64Builder
}

func newSamplesBuilders(rb *array.RecordBuilder) *samplesBuilders {
	str := func(i int) *array.StringBuilder { return rb.Field(i).(*array.StringBuilder) }
	i64 := func(i int) *array.Int64Builder { return rb.Field(i).(*array.Int64Builder) }
	b := &samplesBuilders{
		version: str(0), seq: i64(1), source: str(2), sourceIndex: i64(3), frame: i64(4),
		unixTimeNs: i64(5), simTime: rb.Field(6).(*array.Float64Builder), labelPath: str(7), imagePath: str(8),
		width: i64(9), height: i64(10), kept: i64(11), reasons: rb.Field(12).(*array.ListBuilder),
		errorMsg: str(13), index: i64(14), shard: str(15), shardIndex: i64(16), boxCount: i64(17),
		boxesDropped: i64(18), classIndex: rb.Field(19).(*array.ListBuilder), boxes: rb.Field(20).(*array.ListBuilder),
		letterbox: rb.Field(21).(*array.StructBuilder), detail: str(22),
	}
	b.reasonValues = b.reasons.ValueBuilder().(*array.StringBuilder)
	b.classIndexValues = b.classIndex.ValueBuilder().(*array.Int64Builder)
	b.box = b.boxes.ValueBuilder().(*array.StructBuilder)
	b.boxClass = b.box.FieldBuilder(0).(*array.Int64Builder)
	b.boxClassName = b.box.FieldBuilder(1).(*array.StringBuilder)
	b.boxXMin = b.box.FieldBuilder(2).(*array.Float32Builder)
	b.boxYMin = b.box.FieldBuilder(3).(*array.Float32Builder)
	b.boxXMax = b.box.FieldBuilder(4).(*array.Float32Builder)
	b.boxYMax = b.box.FieldBuilder(5).(*array.Float32Builder)
	b.lbScaleX = b.letterbox.FieldBuilder(0).(*array.Float64Builder)
	b.lbScaleY = b.letterbox.FieldBuilder(1).(*array.Float64Builder)
	b.lbResizedWidth = b.letterbox.FieldBuilder(2).(*array.Int64Builder)
	b.lbResizedHeight = b.letterbox.FieldBuilder(3).(*array.Int64Builder)
	b.lbPadX = b.letterbox.FieldBuilder(4).(*array.Int64Builder)
	b.lbPadY = b.letterbox.FieldBuilder(5).(*array.Int64Builder)
	return b
}

// keptBoxes is what the shards say about one kept sample.
type keptBoxes struct {
	boxes   [][4]float32
	classes []int32
	names   []string // class names of classes
	dropped int64    // -1 when the shard has no meta records
}

// decodedChunkLines is how many decoded samples.jsonl lines travel from
// the decoding goroutine to the writing one at a time; decodedChunks
// chunks may wait, so at most decodedChunks+2 chunks are in memory.
const (
	decodedChunkLines = 1024
	decodedChunks     = 4
)

// writeSamples streams samples.jsonl, joined with the shards, into a
// finished, unpublished samples.parquet. Every line is checked against the
// manifest and, for kept samples, against the shard's meta record.
//
// JSON decoding and Parquet encoding cost about the same, so they run in
// two goroutines: one decodes lines into chunks, the other joins them with
// the shards and writes rows, in order.
func writeSamples(ctx context.Context, dir string, m *warehouse.Manifest) (_ *parquetFile, err error) {
	jsonlName := m.Files.Samples
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(jsonlName)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out, err := createParquet(dir, warehouse.SamplesParquetName, samplesSchema)
	if err != nil {
		return nil, err
	}
	defer abortOnError(out, &err)
	sr := newSampleReader(jsonlName, f)
	g, gctx := errgroup.WithContext(ctx)
	chunks := make(chan []*records.SampleLine, decodedChunks)
	g.Go(func() error {
		defer close(chunks)
		for eof := false; !eof; {
			chunk := make([]*records.SampleLine, 0, decodedChunkLines)
			for len(chunk) < decodedChunkLines {
				s, err := sr.next()
				if errors.Is(err, io.EOF) {
					eof = true
					break
				}
				if err != nil {
					return err
				}
				chunk = append(chunk, s)
			}
			select {
			case chunks <- chunk:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	g.Go(func() error {
		b := newSamplesBuilders(out.rb)
		cursor := newShardCursor(dir, m)
		defer cursor.close()
		classNames := classNameTable(m)
		for chunk := range chunks {
			for _, s := range chunk {
				var kb *keptBoxes
				if s.Kept {
					var err error
					if kb, err = shardBoxes(cursor, s, classNames); err != nil {
						return fmt.Errorf("%s line %d: %w", jsonlName, s.Seq+1, err)
					}
				}
				b.appendSample(m.Version, s, kb)
				if err := out.endRow(); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if sr.line != m.InputSamples || sr.kept != m.Samples {
		return nil, corruptf("%s has %d samples (%d kept), the manifest says %d (%d kept)", jsonlName, sr.line, sr.kept, m.InputSamples, m.Samples)
	}
	return out, out.finish()
}

// shardBoxes reads a kept sample's boxes from its shard and checks that the
// shard agrees with samples.jsonl about which sample it is.
func shardBoxes(c *shardCursor, s *records.SampleLine, classNames map[int64]string) (*keptBoxes, error) {
	r, entry, i, err := c.at(s.Index)
	if err != nil {
		return nil, err
	}
	if entry.ID != s.Shard || int64(i) != s.ShardIndex {
		return nil, corruptf("sample %d is at %s[%d] by the manifest, samples.jsonl says %s[%d]", s.Index, entry.ID, i, s.Shard, s.ShardIndex)
	}
	kb := &keptBoxes{boxes: r.Boxes(i)}
	if r.HasMeta() {
		meta := r.Meta(i)
		if meta.InputSeq != uint64(s.Seq) {
			return nil, corruptf("%s[%d] holds input seq %d, samples.jsonl says %d", entry.ID, i, meta.InputSeq, s.Seq)
		}
		kb.classes = r.ClassIndex(i)
		kb.dropped = int64(meta.BoxesDropped)
		if !slices.EqualFunc(kb.classes, s.ClassIndex, func(a int32, b int64) bool { return int64(a) == b }) {
			return nil, corruptf("%s[%d] has classes %v, samples.jsonl says %v", entry.ID, i, kb.classes, s.ClassIndex)
		}
	} else {
		// A shard without meta records has no class indices: take
		// samples.jsonl's, which must then match the box count.
		kb.classes = make([]int32, len(s.ClassIndex))
		for j, c := range s.ClassIndex {
			kb.classes[j] = int32(c)
		}
		kb.dropped = -1
	}
	if int64(len(kb.boxes)) != s.BoxCount || len(kb.classes) != len(kb.boxes) {
		return nil, corruptf("%s[%d] has %d boxes, samples.jsonl says %d", entry.ID, i, len(kb.boxes), s.BoxCount)
	}
	kb.names = make([]string, len(kb.classes))
	for j, c := range kb.classes {
		name, ok := classNames[int64(c)]
		if !ok {
			return nil, corruptf("%s[%d]: class index %d is not in the manifest's class table", entry.ID, i, c)
		}
		kb.names[j] = name
	}
	return kb, nil
}

// classNameTable maps class index to name; indices the manifest does not
// list are an error where they are used.
func classNameTable(m *warehouse.Manifest) map[int64]string {
	names := make(map[int64]string, len(m.Classes))
	for _, c := range m.Classes {
		names[int64(c.Index)] = c.Name
	}
	return names
}

// appendSample appends one row. kb is nil for a skipped sample.
func (b *samplesBuilders) appendSample(version string, s *records.SampleLine, kb *keptBoxes) {
	b.version.Append(version)
	b.seq.Append(s.Seq)
	b.source.Append(s.Source)
	b.sourceIndex.Append(s.SourceIndex)
	b.frame.Append(int64(s.Frame)) // range checked by records.DecodeSampleLine
	b.unixTimeNs.Append(s.UnixTimeNs)
	b.simTime.Append(s.SimTime)
	b.labelPath.Append(s.LabelPath)
	b.imagePath.Append(s.ImagePath)
	b.width.Append(s.Width)
	b.height.Append(s.Height)
	b.kept.Append(flag(s.Kept))
	b.reasons.Append(true)
	for _, r := range s.Reasons {
		b.reasonValues.Append(r)
	}
	appendNullableString(b.errorMsg, s.Error)
	appendNullableInt64(b.index, s.Index, s.Kept)
	appendNullableString(b.shard, s.Shard)
	appendNullableInt64(b.shardIndex, s.ShardIndex, s.Kept && s.Shard != "") // a plan that was not built has no shards
	b.boxCount.Append(s.BoxCount)
	appendNullableInt64(b.boxesDropped, kbDropped(kb), kb != nil && kb.dropped >= 0)
	b.classIndex.Append(true)
	for _, c := range s.ClassIndex {
		b.classIndexValues.Append(c)
	}
	b.boxes.Append(true)
	if kb != nil {
		for j, box := range kb.boxes {
			b.box.Append(true)
			b.boxClass.Append(int64(kb.classes[j]))
			b.boxClassName.Append(kb.names[j])
			b.boxXMin.Append(box[0])
			b.boxYMin.Append(box[1])
			b.boxXMax.Append(box[2])
			b.boxYMax.Append(box[3])
		}
	}
	if lb := s.Letterbox; lb != nil {
		b.letterbox.Append(true)
		b.lbScaleX.Append(lb.ScaleX)
		b.lbScaleY.Append(lb.ScaleY)
		b.lbResizedWidth.Append(lb.ResizedWidth)
		b.lbResizedHeight.Append(lb.ResizedHeight)
		b.lbPadX.Append(lb.PadX)
		b.lbPadY.Append(lb.PadY)
	} else {
		b.letterbox.AppendNull()
	}
	appendNullableString(b.detail, s.Detail)
}

func kbDropped(kb *keptBoxes) int64 {
	if kb == nil {
		return 0
	}
	return kb.dropped
}

// PlanSamplesWriter writes the samples.parquet of a plan that was not
// built (a build that failed its thresholds, warehouse-etl validate): the
// same columns as a version's, from samples.jsonl lines that name no shard,
// so boxes and boxes_dropped are empty and shard and shard_index null.
type PlanSamplesWriter struct {
	version string
	out     *parquetFile
	b       *samplesBuilders
}

// NewPlanSamplesWriter creates dir/samples.parquet for version; Close
// finishes it, Abort removes it.
func NewPlanSamplesWriter(dir, version string) (*PlanSamplesWriter, error) {
	out, err := createParquet(dir, warehouse.SamplesParquetName, samplesSchema)
	if err != nil {
		return nil, err
	}
	return &PlanSamplesWriter{version: version, out: out, b: newSamplesBuilders(out.rb)}, nil
}

// Write appends one sample.
func (w *PlanSamplesWriter) Write(s *records.SampleLine) error {
	w.b.appendSample(w.version, s, nil)
	return w.out.endRow()
}

// Close finishes the file and renames it into place.
func (w *PlanSamplesWriter) Close() error {
	if err := w.out.finish(); err != nil {
		return err
	}
	if err := w.out.publish(); err != nil {
		return err
	}
	w.out.rb.Release()
	return nil
}

// Abort removes the unfinished file.
func (w *PlanSamplesWriter) Abort() { w.out.abort() }
