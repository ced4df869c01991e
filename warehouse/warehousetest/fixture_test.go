package warehousetest

import "testing"

// The fixture is exactly what the docs say about sizes, so the hard-coded
// byte counts in the tests that break it (verify's badInputCases) are not
// produced by the reader.
func TestFixtureSizesMatchTheFormatDoc(t *testing.T) {
	fx := Write(t, DefaultSpec())
	// 4 samples of 3x4x6 F16, max_boxes 3: images 4*144, boxes 4*24, mask
	// 4*6, padded to 776, meta header 24, records 4*96 end at 1184 (a
	// multiple of 8), checksum header 16, CRCs 4*4, table CRC 4.
	if got := fx.M.Shards[1].Bytes; got != 80+576+96+24+24+384+16+16+4 {
		t.Fatalf("shard-00001 is %d bytes", got)
	}
	// 3 samples: 80+432+72+18 = 602, padded to 608, +24 +3*96 = 920, +16
	// +3*4 +4.
	if got := fx.M.Shards[2].Bytes; got != 608+24+288+16+12+4 {
		t.Fatalf("shard-00002 is %d bytes", got)
	}
}
