package wshard

import (
	"warehouse-etl/sources/wshard/container"
	"warehouse-etl/validate"
)

// imageChannel is an episode's camera channel, checked: u8 frames of
// H x W pixels with C channels (1 gray, 3 RGB, 4 RGBA), T of them in one
// block.
type imageChannel struct {
	Channel
	entry   container.Entry
	W, H, C int
}

// frameBytes is the size of one stored frame.
func (c imageChannel) frameBytes() int { return c.W * c.H * c.C }

// defaultCamera picks the image channel when the config names none: the
// first channel with modality rgb, else the first u8 [H, W, 3] channel.
// "" when there is none.
func defaultCamera(channels []Channel) string {
	for _, c := range channels {
		if c.Modality == "rgb" {
			return c.Block
		}
	}
	for _, c := range channels {
		if c.err == nil && c.DType == U8 && len(c.Shape) == 3 && c.Shape[2] == 3 {
			return c.Block
		}
	}
	return ""
}

// imageChannel finds and checks the camera channel called name (a block
// name or a channel id). Not declared: camera_missing. Declared but not an
// image (dtype other than u8, shape other than [H,W], [H,W,1], [H,W,3],
// [H,W,4], or a zero side): decode_error. Then the block must exist
// (missing_block) and hold length_T frames (block_size_mismatch).
func (e *Episode) imageChannel(name string) (imageChannel, error) {
	c, ok := e.Channel(name)
	if !ok {
		return imageChannel{}, problemf(validate.ReasonCameraMissing, e.Name, "no channel %q declared in meta/channels", name)
	}
	if c.err != nil {
		return imageChannel{}, problemf(validate.ReasonBadSchema, e.Name, "channel %q: %v", c.Block, c.err)
	}
	img := imageChannel{Channel: c}
	switch len(c.Shape) {
	case 2:
		img.H, img.W, img.C = c.Shape[0], c.Shape[1], 1
	case 3:
		img.H, img.W, img.C = c.Shape[0], c.Shape[1], c.Shape[2]
	}
	if c.DType != U8 || img.W < 1 || img.H < 1 || (img.C != 1 && img.C != 3 && img.C != 4) {
		return imageChannel{}, problemf(validate.ReasonDecodeError, e.Name, "channel %q is %s %v: not an image (want u8 [H,W], [H,W,1], [H,W,3] or [H,W,4])", c.Block, c.DType, c.Shape)
	}
	entry, err := e.block(c)
	if err != nil {
		return img, err // W and H are known: the caller can still size its samples
	}
	img.entry = entry
	return img, nil
}

// toRGB returns one frame as packed RGB: the stored bytes themselves for
// RGB, grayscale expanded to three equal channels, RGBA without alpha.
func toRGB(frame []byte, c int) []byte {
	switch c {
	case 3:
		return frame
	case 1:
		out := make([]byte, 3*len(frame))
		for i, v := range frame {
			out[3*i], out[3*i+1], out[3*i+2] = v, v, v
		}
		return out
	}
	n := len(frame) / 4
	out := make([]byte, 3*n)
	for i := range n {
		copy(out[3*i:3*i+3], frame[4*i:4*i+3])
	}
	return out
}
