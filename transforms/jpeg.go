package transforms

// What both builds' JPEG paths share: the DCT scale rule and the
// allocation-free header size reader.

// dctScales are the DCT-domain scale denominators tried, largest first.
var dctScales = [...]int{8, 4, 2}

// dctScaleDenom returns the DCT scaling denominator for a stored w x h JPEG
// that will be resampled to the stored-orientation size nw x nh: the
// largest k in 8, 4, 2 with w >= k*nw and h >= k*nh, else 1. The scaled
// image, ceil(w/k) x ceil(h/k), is then at least the new size on both
// axes, and the antialiased resampler still makes the last step.
func dctScaleDenom(w, h, nw, nh int) int {
	for _, k := range dctScales {
		if w >= k*nw && h >= k*nh {
			return k
		}
	}
	return 1
}

// jpegQuickSize reads the frame size from the first SOF0, SOF1 or SOF2
// segment (the ones image/jpeg decodes) without allocating: both builds'
// JPEG decoders allocate nothing per image, jpeg.DecodeConfig 13 KiB. It
// declines (and jpeg.DecodeConfig decides) for anything else: no SOF
// before SOS, another SOF type, a zero size (DNL), a short segment.
// decodeJPEG checks the size against the decoder's own header parse.
//
//	SOFn payload := precision(1) height(2) width(2) components(1) ...
func jpegQuickSize(data []byte) (w, h int, ok bool) {
	jpegSegments(data, func(marker byte, payload []byte) bool {
		if marker < 0xC0 || marker > 0xCF || marker == 0xC4 || marker == 0xC8 || marker == 0xCC {
			return true // not a frame header (DHT, JPG, DAC)
		}
		if marker <= 0xC2 && len(payload) >= 6 && payload[0] == 8 {
			h = int(payload[1])<<8 | int(payload[2])
			w = int(payload[3])<<8 | int(payload[4])
			ok = w > 0 && h > 0
		}
		return false
	})
	return w, h, ok
}
