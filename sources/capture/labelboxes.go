package capture

import (
	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

// LabelBox is one well-formed box entry of a label file as written, with
// the verdict Scan gives it: what a viewer draws for a refused label.
type LabelBox struct {
	// Written are the coordinates as the label gives them, in source
	// pixels (bbox_px, or bbox_norm times the image size); nil when the
	// entry has neither or the image size is needed and unknown.
	Written *[4]float64
	Class   sources.ClassKey
	// Reason is the check's verdict for an image of the given size; ""
	// when the box is fine.
	Reason validate.Reason
}

// LabelBoxes parses a label file exactly as Scan does (labelKeys name the
// list; nil: the defaults) and checks each box against a w x h image (0 x 0:
// size unknown). Malformed entries are not returned: they are bad_schema,
// and have no coordinates to draw.
func LabelBoxes(data []byte, labelKeys []string, w, h int) []LabelBox {
	if labelKeys == nil {
		labelKeys = defaultLabelKeys
	}
	sized := w > 0 && h > 0
	l := parseLabel(data, labelKeys)
	out := make([]LabelBox, 0, len(l.boxes))
	for _, b := range l.boxes {
		_, r := b.check(w, h, sized)
		lb := LabelBox{Class: b.class, Reason: r}
		switch {
		case b.px != nil:
			v := *b.px
			lb.Written = &v
		case b.norm != nil && sized:
			v := [4]float64{b.norm[0] * float64(w), b.norm[1] * float64(h), b.norm[2] * float64(w), b.norm[3] * float64(h)}
			lb.Written = &v
		}
		out = append(out, lb)
	}
	return out
}
