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
