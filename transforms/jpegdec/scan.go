package jpegdec

// unzig maps a zig-zag index to its natural (row-major) index.
var unzig = [blockSize]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// emptyTable decodes nothing: the table of a scan that names a table no
// DHT defined (image/jpeg fails on its first use, not before).
var emptyTable = func() *huffTable {
	h := &huffTable{}
	for l := range h.maxCode {
		h.maxCode[l] = -1
	}
	return h
}()

// scanComp is one component of a scan.
type scanComp struct {
	ci     int // index into d.comp
	dc, ac *huffTable
	q      *[blockSize]int32
}

// processSOS reads a scan header (B.2.3) with image/jpeg's checks and
// decodes the scan.
//
//	SOS := Ns(1) { Cs(1) Td<<4|Ta(1) } x Ns Ss(1) Se(1) Ah<<4|Al(1)
func (d *Decoder) processSOS(n int) error {
	if d.nComp == 0 {
		return formatError("missing SOF marker")
	}
	if n < 6 || 4+2*d.nComp < n || n%2 != 0 {
		return formatError("SOS has wrong length")
	}
	p, err := d.read(n)
	if err != nil {
		return err
	}
	ns := int(p[0])
	if n != 4+2*ns {
		return formatError("SOS length inconsistent with number of components")
	}
	var scan [maxComponents]scanComp
	totalHV := 0
	for i := 0; i < ns; i++ {
		cs := p[1+2*i]
		ci := -1
		for j := 0; j < d.nComp; j++ {
			if cs == d.comp[j].id {
				ci = j
			}
		}
		if ci < 0 {
			return formatError("unknown component selector")
		}
		for j := 0; j < i; j++ {
			if scan[j].ci == ci {
				return formatError("repeated component selector")
			}
		}
		totalHV += d.comp[ci].h * d.comp[ci].v
		td, ta := p[2+2*i]>>4, p[2+2*i]&0x0f
		if td > maxTh || (d.baseline && td > 1) {
			return formatError("bad Td value")
		}
		if ta > maxTh || (d.baseline && ta > 1) {
			return formatError("bad Ta value")
		}
		scan[i] = scanComp{ci: ci, dc: d.table(0, td), ac: d.table(1, ta), q: &d.quant[d.comp[ci].tq]}
	}
	if d.nComp > 1 && totalHV > 10 {
		return formatError("total sampling factors too large")
	}
	if !d.planesReady() {
		d.layoutPlanes()
	}
	for i := 0; i < ns; i++ {
		d.comp[scan[i].ci].scanned = true
	}
	return d.decodeScan(scan[:ns])
}

func (d *Decoder) table(class int, id uint8) *huffTable {
	if h := &d.huff[class][id]; h.nCodes > 0 {
		return h
	}
	return emptyTable
}

// decodeScan decodes the entropy-coded data of one sequential scan, block
// by block into the planes, in image/jpeg's order: interleaved scans MCU by
// MCU; a one-component scan block by block over mxx*h x myy*v blocks,
// skipping those that start outside the frame (image/jpeg compares with
// the frame's, not the component's, size) and counting an MCU per h*v
// block positions for the restart interval.
func (d *Decoder) decodeScan(scan []scanComp) error {
	br := bitReader{data: d.data, pos: d.pos}
	var dc [maxComponents]int32
	var blk [blockSize]int32
	mcu, expectedRST := 0, byte(markerRST0)
	blockCount := 0
	for my := 0; my < d.myy; my++ {
		for mx := 0; mx < d.mxx; mx++ {
			for i := range scan {
				sc := &scan[i]
				c := &d.comp[sc.ci]
				bs := 8 / c.scale
				xx, yy := 0, 0 // j%c.h and j/c.h, without dividing per block
				for j := 0; j < c.h*c.v; j++ {
					var bx, by int
					if len(scan) != 1 {
						bx, by = c.h*mx+xx, c.v*my+yy
						if xx++; xx == c.h {
							xx, yy = 0, yy+1
						}
					} else {
						q := d.mxx * c.h
						bx, by = blockCount%q, blockCount/q
						blockCount++
						if bx*8 >= d.width || by*8 >= d.height {
							continue
						}
					}
					hasAC, err := d.decodeBlock(&br, sc, &dc[sc.ci], &blk)
					if err != nil {
						return err
					}
					dst := c.plane[by*bs*c.stride+bx*bs:]
					if hasAC {
						reconstruct(&blk, c.scale, dst, c.stride)
					} else {
						reconstructDC(blk[0], c.scale, dst, c.stride)
					}
				}
			}
			if br.short() {
				return errShortData
			}
			mcu++
			if d.ri > 0 && mcu%d.ri == 0 && mcu < d.mxx*d.myy {
				pos, err := findRST(d.data, br.pos, expectedRST)
				if err != nil {
					return err
				}
				expectedRST++
				if expectedRST == markerRST7+1 {
					expectedRST = markerRST0
				}
				br = bitReader{data: d.data, pos: pos}
				dc = [maxComponents]int32{}
				d.eobRun = 0
			}
		}
	}
	d.pos = br.pos
	return nil
}

// findRST finds the restart marker expected after an interval, starting at
// pos (at or after the end of the interval's data), as image/jpeg does:
// 0xFF00 pairs and other data bytes are skipped, 0xFF fill bytes too; any
// other marker is an error. It returns the position after the marker.
func findRST(data []byte, pos int, expected byte) (int, error) {
	for {
		if pos+2 > len(data) {
			return 0, errEOF
		}
		a, b := data[pos], data[pos+1]
		switch {
		case a == 0xFF && b == expected:
			return pos + 2, nil
		case a == 0xFF && b == 0xFF:
			pos++
		case a == 0xFF && b != 0x00:
			return 0, formatError("bad RST marker")
		case a != 0xFF && b == 0xFF:
			pos++
		default:
			pos += 2
		}
	}
}

// decodeBlock decodes one block's coefficients (F.2.2), dequantized, into
// blk in natural order, following image/jpeg step by step, corrupt streams
// included: a DC size above 16 is an error, an AC run past the block ends
// it without reading the value's bits, an EOBn code (n > 0, not baseline
// but accepted) starts an end-of-band run that skips the AC data of the
// next blocks of any component.
//
// hasAC reports whether any AC coefficient was set; without one the block
// is flat and reconstructDC does its work.
func (d *Decoder) decodeBlock(br *bitReader, sc *scanComp, dc *int32, blk *[blockSize]int32) (hasAC bool, err error) {
	*blk = [blockSize]int32{}
	q := sc.q
	if br.n < 32 {
		br.fill()
	}
	if e := sc.dc.ac[br.acc>>(64-lookBits)]; e != 0 && e>>10&0x0f == 0 {
		// A DC size below 16 with its bits in the lookahead (the table's
		// "run" nibble is the size's high bits, zero for those).
		l := uint(e) & 0x1f
		br.acc <<= l
		br.n -= l
		*dc += e >> 16
	} else {
		t, ok := br.decode(sc.dc)
		if !ok {
			return false, formatError("bad Huffman code")
		}
		if t > 16 {
			return false, unsupportedDC
		}
		*dc += br.receiveExtend(t)
	}
	blk[0] = *dc * q[0]
	if d.eobRun > 0 {
		d.eobRun--
		return false, nil
	}
	ac := sc.ac
	// acc and n live in registers through the loop (through br they would
	// be stored and loaded again for every coefficient); br has them back
	// before every call on it.
	acc, n := br.acc, br.n
	for zig := 1; zig < blockSize; zig++ {
		if n < 32 {
			// fill, on the registers (fill itself does not inline).
			if a, m, k, ok := refill8(br.data, br.pos, acc, n); ok && !br.marker {
				acc, n, br.pos = a, m, br.pos+k
			} else {
				br.acc, br.n = acc, n
				br.fillBytes()
				acc, n = br.acc, br.n
			}
		}
		if e := ac.ac[acc>>(64-lookBits)]; e != 0 {
			zig += int(e>>10) & 0x3f
			if zig >= blockSize {
				// As in acSlow: a run past the block ends it, and the
				// value's bits stay unread. An end of block (run
				// acEOBRun) ends it here too.
				l := uint(e>>5) & 0x1f
				acc <<= l
				n -= l
				break
			}
			l := uint(e) & 0x1f
			acc <<= l
			n -= l
			blk[unzig[zig]] = e >> 16 * q[zig]
			hasAC = true
			continue
		}
		br.acc, br.n = acc, n
		z, set, stop, err := d.acSlow(br, ac, zig, blk, q)
		if err != nil {
			return false, err
		}
		acc, n = br.acc, br.n
		zig, hasAC = z, hasAC || set
		if stop {
			break
		}
	}
	br.acc, br.n = acc, n
	return hasAC, nil
}

// acSlow decodes the AC symbol at zig-zag index zig that the combined
// lookahead table does not resolve (a code longer than lookBits, a value
// whose bits do not fit in it, a run of zeros or an end of band) into blk,
// and returns the index reached, whether it set a coefficient, and whether
// the block ends there.
func (d *Decoder) acSlow(br *bitReader, ac *huffTable, zig int, blk, q *[blockSize]int32) (int, bool, bool, error) {
	// decode, with its table read here (decode does not inline).
	var v uint8
	if le := ac.look[br.acc>>(64-lookBits)]; le != 0 {
		l := uint(le & 0x1f)
		br.acc <<= l
		br.n -= l
		v = uint8(le >> 8)
	} else {
		var ok bool
		if v, ok = br.decodeLong(ac); !ok {
			return zig, false, true, formatError("bad Huffman code")
		}
	}
	r, s := v>>4, v&0x0f
	if s != 0 {
		zig += int(r)
		if zig >= blockSize {
			return zig, false, true, nil
		}
		blk[unzig[zig]] = br.receiveExtend(s) * q[zig]
		return zig, true, false, nil
	}
	if r != 0x0f {
		d.eobRun = uint16(1) << r
		if r != 0 {
			d.eobRun |= uint16(br.bits(r))
		}
		d.eobRun--
		return zig, false, true, nil
	}
	return zig + 0x0f, false, false, nil
}

var unsupportedDC = formatError("excessive DC component")
