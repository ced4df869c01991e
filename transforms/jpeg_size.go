package transforms

import "errors"

// errJPEGShortScan is a JPEG whose entropy-coded data is too short for the
// frame its header declares (jpegDataCanHold).
var errJPEGShortScan = errors.New("jpeg: the scan data is too short for the declared frame size")

// jpegDataCanHold reports whether the bytes after a JPEG's first SOS can
// hold the frame its SOF declares, before any decoder allocates planes or
// an output buffer for that size. Every block of every component a scan
// codes costs at least one bit (a Huffman code is at least one bit long:
// a sequential scan spends two on a block, a DC code and an EOB; the first
// scan of a progressive file at least the DC code), and the first scan
// codes at least one component, so the data after it needs at least
// min over components of that component's block count / 8 bytes. Without
// it a 35-byte file declaring 8000x8000 made Apply allocate 183 MiB
// (image/jpeg) before failing on the missing data. Anything it cannot
// parse is left to the decoders, which refuse it.
//
//	SOFn payload := precision(1) height(2) width(2) n(1) n*(id(1) hv(1) tq(1))
func jpegDataCanHold(data []byte) bool {
	var sof []byte
	i := 2
	if len(data) < 2 || data[0] != 0xFF || data[1] != markerSOI {
		return true
	}
	for i+1 < len(data) {
		if data[i] != 0xFF {
			return true
		}
		marker := data[i+1]
		switch {
		case marker == 0xFF:
			i++
			continue
		case marker == markerSOI || marker == markerTEM || (marker >= markerRST0 && marker <= markerRST7):
			i += 2
			continue
		case marker == markerEOI:
			return true
		}
		if i+4 > len(data) {
			return true
		}
		segLen := int(data[i+2])<<8 | int(data[i+3])
		if segLen < 2 || i+2+segLen > len(data) {
			return true
		}
		payload := data[i+4 : i+2+segLen]
		if marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC && sof == nil {
			sof = payload
		}
		i += 2 + segLen
		if marker == markerSOS {
			return sof == nil || uint64(len(data)-i) >= jpegMinScanBytes(sof)
		}
	}
	return true
}

// jpegMinScanBytes is the fewest bytes of entropy-coded data one scan of
// the frame sof describes can take (0 when sof does not parse).
func jpegMinScanBytes(sof []byte) uint64 {
	if len(sof) < 6 {
		return 0
	}
	h := uint64(sof[1])<<8 | uint64(sof[2])
	w := uint64(sof[3])<<8 | uint64(sof[4])
	n := int(sof[5])
	if n == 0 || len(sof) < 6+3*n {
		return 0
	}
	var hmax, vmax uint64 = 1, 1
	for c := range n {
		hv := sof[7+3*c]
		hmax, vmax = max(hmax, uint64(hv>>4)), max(vmax, uint64(hv&15))
	}
	least := ^uint64(0)
	for c := range n {
		hv := sof[7+3*c]
		ch, cv := uint64(hv>>4), uint64(hv&15)
		if ch == 0 || cv == 0 {
			return 0
		}
		cw := (w*ch + hmax - 1) / hmax // the component's samples, as T.81 A.1.1
		cht := (h*cv + vmax - 1) / vmax
		least = min(least, ((cw+7)/8)*((cht+7)/8))
	}
	return least / 8
}
