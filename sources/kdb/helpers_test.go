package kdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math"
	"sync"
	"testing"
	"time"

	"warehouse-etl/sources"
)

// This file builds small .kdb files for tests, written from
// ../shared/formats/kdb.md like testdata/kdbgen (which is a main package
// and cannot be imported), and records where every part landed so that
// corruption tests can patch exact offsets.

type tCamera struct {
	name       string
	w, h       uint32
	ch, format uint8
	data       []byte
	legacy     bool // write the reference's pre-format-byte record (no format byte)
}

type tFrame struct {
	state, action []float32
	reward        float32
	terminal      bool
	cams          []tCamera
}

type tEpisode struct {
	id     uint64
	meta   []byte // nil: tMeta("arm", "task", 10, 2, nil)
	frames []tFrame
	// state_dim/action_dim for the index; -1 means from the first frame
	stateDim, actionDim int
}

// tLayout is where build put everything.
type tLayout struct {
	file        []byte
	indexOffset int
	entries     []tEntry
}

type tEntry struct {
	at                         int // offset of the index entry
	meta, actions, images      [2]int
	frames                     []int   // offset of each frame's num_cameras in the image section
	records                    [][]int // offset of each camera record, per frame
	dataOffsets, dataLenFields [][]int
}

func tMeta(embodiment, task string, fps float32, success byte, reward *float32) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint16(b, uint16(len(embodiment)))
	b = append(b, embodiment...)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(task)))
	b = append(b, task...)
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(fps))
	b = append(b, success)
	if reward == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(*reward))
}

func build(eps []tEpisode) tLayout {
	le := binary.LittleEndian
	f := make([]byte, 64)
	var lay tLayout
	var index []byte
	var frames uint64
	for _, ep := range eps {
		var ent tEntry
		meta := ep.meta
		if meta == nil {
			meta = tMeta("arm", "task", 10, 2, nil)
		}
		ent.meta = [2]int{len(f), len(meta)}
		f = append(f, meta...)
		start := len(f)
		for _, fr := range ep.frames {
			for _, v := range fr.state {
				f = le.AppendUint32(f, math.Float32bits(v))
			}
			for _, v := range fr.action {
				f = le.AppendUint32(f, math.Float32bits(v))
			}
			f = le.AppendUint32(f, math.Float32bits(fr.reward))
			f = append(f, boolByte(fr.terminal))
		}
		ent.actions = [2]int{start, len(f) - start}
		start = len(f)
		for _, fr := range ep.frames {
			ent.frames = append(ent.frames, len(f))
			var recs, datas, lens []int
			f = le.AppendUint16(f, uint16(len(fr.cams)))
			for _, c := range fr.cams {
				recs = append(recs, len(f))
				f = le.AppendUint16(f, uint16(len(c.name)))
				f = append(f, c.name...)
				f = le.AppendUint32(f, c.w)
				f = le.AppendUint32(f, c.h)
				f = append(f, c.ch)
				if !c.legacy {
					f = append(f, c.format)
				}
				lens = append(lens, len(f))
				f = le.AppendUint32(f, uint32(len(c.data)))
				datas = append(datas, len(f))
				f = append(f, c.data...)
			}
			ent.records = append(ent.records, recs)
			ent.dataOffsets = append(ent.dataOffsets, datas)
			ent.dataLenFields = append(ent.dataLenFields, lens)
		}
		ent.images = [2]int{start, len(f) - start}
		sd, ad := ep.stateDim, ep.actionDim
		if sd < 0 {
			sd = 0
			if len(ep.frames) > 0 {
				sd = len(ep.frames[0].state)
			}
		}
		if ad < 0 {
			ad = 0
			if len(ep.frames) > 0 {
				ad = len(ep.frames[0].action)
			}
		}
		ent.at = len(index) // made absolute below
		index = le.AppendUint64(index, ep.id)
		index = le.AppendUint32(index, uint32(len(ep.frames)))
		index = le.AppendUint16(index, uint16(ad))
		index = le.AppendUint16(index, uint16(sd))
		for _, s := range [][2]int{ent.actions, ent.images, ent.meta} {
			index = le.AppendUint64(index, uint64(s[0]))
			index = le.AppendUint64(index, uint64(s[1]))
		}
		frames += uint64(len(ep.frames))
		lay.entries = append(lay.entries, ent)
	}
	lay.indexOffset = len(f)
	for i := range lay.entries {
		lay.entries[i].at += lay.indexOffset
	}
	f = append(f, index...)
	copy(f, "KINO")
	le.PutUint16(f[4:], 0)
	le.PutUint16(f[6:], 1)
	le.PutUint64(f[8:], uint64(len(eps)))
	le.PutUint64(f[16:], frames)
	le.PutUint64(f[24:], uint64(lay.indexOffset))
	le.PutUint64(f[32:], uint64(len(index)))
	le.PutUint64(f[40:], 1700000000)
	lay.file = f
	return lay
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// tSteps fills frames with state/action/reward values from simple formulas.
func tStep(id uint64, t, n, sd, ad int) tFrame {
	fr := tFrame{reward: float32(t) / 2, terminal: t == n-1}
	for j := range sd {
		fr.state = append(fr.state, float32(id)*10+float32(t)+float32(j)/8)
	}
	for k := range ad {
		fr.action = append(fr.action, -float32(k)-float32(t)/4)
	}
	return fr
}

// rawCamera is a w x h image with ch channels whose bytes count up from seed.
func rawCamera(name string, w, h uint32, ch uint8, seed byte) tCamera {
	data := make([]byte, int(w*h)*int(ch))
	for i := range data {
		data[i] = seed + byte(i)
	}
	return tCamera{name: name, w: w, h: h, ch: ch, format: FormatRaw, data: data}
}

func pngCamera(t testing.TB, name string, w, h int) tCamera {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 40), uint8(y * 40), 99, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return tCamera{name: name, w: uint32(w), h: uint32(h), ch: 3, format: FormatCompressed, data: buf.Bytes()}
}

// tinyEpisodes is a small two-episode file (ids out of order) with a raw
// and a PNG camera: the file for truncation and fuzz seeds.
func tinyEpisodes(t testing.TB) []tEpisode {
	var eps []tEpisode
	for _, id := range []uint64{1, 0} {
		ep := tEpisode{id: id, stateDim: -1, actionDim: -1}
		n := 2 - int(id)
		for k := range n {
			fr := tStep(id, k, n, 2, 3)
			fr.cams = []tCamera{rawCamera("cam", 2, 2, 3, byte(k)), pngCamera(t, "png", 2, 2)}
			ep.frames = append(ep.frames, fr)
		}
		eps = append(eps, ep)
	}
	return eps
}

// memHandle is an in-memory fileHandle.
type memHandle struct {
	*bytes.Reader
	size int64

	mu    sync.Mutex
	reads [][2]int64 // offset, length of every ReadAt when recording
	rec   bool
}

func newMem(b []byte) *memHandle { return &memHandle{Reader: bytes.NewReader(b), size: int64(len(b))} }

func (m *memHandle) ReadAt(p []byte, off int64) (int, error) {
	if m.rec {
		m.mu.Lock()
		m.reads = append(m.reads, [2]int64{off, int64(len(p))})
		m.mu.Unlock()
	}
	return m.Reader.ReadAt(p, off)
}

func (m *memHandle) Close() error               { return nil }
func (m *memHandle) Stat() (fs.FileInfo, error) { return memInfo{m.size}, nil }

type memInfo struct{ size int64 }

func (i memInfo) Name() string       { return "mem.kdb" }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Unix(1700000000, 0) }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// memSource builds a Source over in-memory files, as New does over paths.
func memSource(files map[string][]byte, order []string, opts Options) (*Source, error) {
	s, err := newSource("mem", opts)
	if err != nil {
		return nil, err
	}
	for _, rel := range order {
		if err := s.add(rel, newMem(files[rel])); err != nil {
			return nil, err
		}
	}
	return s, s.finish()
}

// scanAll runs Scan and returns copies of every sample.
func scanAll(t testing.TB, s *Source) []sources.Sample {
	t.Helper()
	var out []sources.Sample
	err := s.Scan(context.Background(), func(smp *sources.Sample) error {
		out = append(out, *smp)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
