package shard

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math/rand/v2"
	"testing"
)

// shortWriter takes at most room more bytes, then fails.
type shortWriter struct {
	bytes.Buffer
	room int
}

func (s *shortWriter) Write(p []byte) (int, error) {
	if len(p) > s.room {
		n, _ := s.Buffer.Write(p[:s.room])
		s.room = 0
		return n, errors.New("disk full")
	}
	s.room -= len(p)
	return s.Buffer.Write(p)
}

// The digest of a hashingWriter is the sha256 of exactly the bytes its
// writer took, whether a write is hashed alongside (overlapBytes and more)
// or inline, and when a large write is short.
func TestHashingWriterDigest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 24))
	data := make([]byte, 5<<20)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	for _, room := range []int{len(data), 3 << 20, 3<<20 + 17, overlapBytes / 2} {
		w := &shortWriter{room: room}
		hw := &hashingWriter{w: w, h: sha256.New()}
		rest := data
		for len(rest) > 0 {
			k := min(len(rest), []int{100, overlapBytes - 1, overlapBytes, 1 << 20, 1<<20 + 5}[rng.IntN(5)])
			n, err := hw.Write(rest[:k])
			rest = rest[n:]
			if err != nil {
				break
			}
		}
		if got, want := [32]byte(hw.h.Sum(nil)), sha256.Sum256(w.Bytes()); got != want || hw.n != int64(w.Len()) {
			t.Fatalf("room %d: digest %x of %d bytes, the %d written bytes' %x", room, got, hw.n, w.Len(), want)
		}
		if w.Len() != min(room, len(data)) {
			t.Fatalf("room %d: %d bytes written", room, w.Len())
		}
	}
}

// Shards of images written around the buffer (overlapBytes and more) are
// the shards of the same samples written through it: same bytes, a Result
// that describes them, full and short, plain and compact.
func TestLargeImagesWrittenDirectly(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 24))
	for _, l := range []Layout{
		{DType: U8, Width: 384, Height: 384, Channels: 3, MaxBoxes: 4},
		{DType: U8, Width: 384, Height: 384, Channels: 3, MaxBoxes: 4, Compact: true, Pad: 114},
		{DType: F16, Width: 200, Height: 120, Channels: 3, MaxBoxes: 2, ExtraF32: 1},
	} {
		samples := randomSamples(rng, l, 5)
		if l.Compact {
			samples = letterboxSamples(rng, l, 5)
		}
		for _, declared := range []int{5, 7} {
			b, res := writeShard(t, l, declared, samples)
			if res.Bytes != int64(len(b)) || res.SHA256 != sha256.Sum256(b) || res.Samples != len(samples) {
				t.Fatalf("%+v declared %d: Result %+v does not describe the %d-byte file", l, declared, res, len(b))
			}
			r := mustParse(t, b)
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
			for i, s := range samples {
				if !bytes.Equal(r.Image(i), s.Image) {
					t.Fatalf("%+v declared %d: sample %d's image differs", l, declared, i)
				}
				if err := r.VerifySample(i, s.Image); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}
