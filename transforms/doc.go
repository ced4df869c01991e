// Package transforms turns one encoded image (or one raw RGB frame) into a
// fixed-shape tensor: decode -> orient -> RGB -> resize/letterbox ->
// normalize, written into a caller-provided CHW buffer of f16 or f32.
//
// The output is bit-identical on every run, for every worker count and on
// every CPU architecture; the rules that guarantee it are listed under
// Determinism below. It imports nothing of this module outside itself:
// decoders come from the standard library and golang.org/x/image, plus this
// package's own PNG fast path and JPEG decoder (transforms/jpegdec), or
// libjpeg-turbo in the turbojpeg build; float16 rounding from
// github.com/x448/float16.
//
// # Pipeline
//
//	encoded bytes
//	  -> readHeader      format by magic bytes, size from the header only,
//	                     limits checked, EXIF orientation (JPEG)
//	  -> decoder         PNG: own fast path (8-bit RGB/RGBA) else image/png;
//	                     JPEG: jpegdec (DCT-scaled) else image/jpeg, or
//	                     libjpeg-turbo (-tags turbojpeg);
//	                     image/gif, x/image bmp/tiff/webp
//	  -> convertToRGB    packed 8-bit RGB, alpha dropped (std decoders only;
//	                     the fast paths hand over RGB or RGBA rows as they are)
//	  -> orient          EXIF orientation 2..8 applied
//	  -> resample        antialiased triangle filter, integer weights
//	  -> normalize       per-channel lookup table -> f32/f16 little-endian
//	out: [3][Height][Width] elements, planes R, G, B; pad value around the image
//
// A Transformer owns every buffer of this chain and reuses it: on the PNG
// fast path and the jpegdec and libjpeg-turbo paths, Apply allocates
// nothing once the buffers have grown to the image size (image/jpeg and the
// other standard decoders allocate their image per call).
//
// # Fast PNG
//
// png.go reads 8-bit RGB and RGBA non-interlaced PNGs (the capture tool's
// format) itself: chunks in place with their CRCs, the IDAT payloads
// concatenated, inflate.go's whole-buffer zlib decoder (64-bit bit buffer,
// one table lookup for most codes, output written straight into one
// buffer), the row filters undone in place, Adler-32 checked. It accepts
// only files image/png accepts and gives the same pixels; any file it
// declines (another kind of PNG, or anything unusual or broken) goes to
// image/png, which decides. FuzzPNG and FuzzInflate check both promises
// against image/png and compress/zlib.
//
// # JPEG (default build)
//
// transforms/jpegdec decodes sequential Huffman JPEGs (baseline and
// extended, 8-bit, gray or three components with any sampling factors
// image/jpeg accepts: 4:4:4, 4:2:2, 4:2:0, 4:4:0, 4:1:1, 4:1:0; restart
// intervals; Adobe APP14 RGB) into planar Y, Cb, Cr in reusable buffers.
// It shrinks in the DCT domain by the rule of the turbojpeg build below
// (largest k of 2, 4, 8 with stored size >= k * new size on both axes):
// reduced inverse DCTs after libjpeg's jidctred.c emit 4x4, 2x2 or 1x1
// samples per block, so 1920x1080 into 384x384 decodes at 480x270 and the
// antialiased resampler makes the last step. Scaled, chroma comes out at
// the luma's resolution as libjpeg-turbo makes it: 4:2:0 chroma blocks are
// decoded at twice the luma's DCT scale, other subsamplings interpolated
// with libjpeg's triangle filter (replicating a chroma sample that covers
// 2x2 or 4x4 output-sized pixels doubled the error against OpenCV), and
// the 4:4:4 planes are converted to RGB at the decoded size. At 1/1, 4:2:0
// and 4:2:2 planes go to the resampler as they are and are converted a
// row at a time (image/jpeg's replicated chroma). Converting after the
// resampler instead (three planes resampled, RGB at the output size) would
// save at most the conversion, a few percent of the transform in the
// profile, so the simpler order stays.
// At 1/1 the samples equal image/jpeg's exactly (its IDCT, same layout;
// TestMatchesImageJPEG on an ImageMagick corpus, FuzzDecode against
// image/jpeg). Scaled, per channel over the letterboxed output, |difference|
// from image/jpeg at full size then resampled has mean <= 1.5, 99th
// percentile <= 8 and max <= 100 levels of 255 on the tests' noisy images
// (TestJPEGMatchesImageJPEG, observed 1.17, 6, 43); against libjpeg-turbo's
// scaled decode, mean <= 0.3 and max <= 4 (TestJPEGDecMatchesTurboScaled,
// turbojpeg tag); against OpenCV's INTER_AREA on a bench-like 1080p frame,
// mean <= 1.0 at 384 and 640 (TestJPEGMatchesOpenCVArea, observed 0.69 and
// 0.67); jpegdec's own tests bound the scaled planes against box means of
// the full-size planes. Progressive, arithmetic,
// 12-bit, CMYK/YCCK streams go to image/jpeg at full size and are counted
// (Counts.JPEGFallback, build_report.json's jpeg_fallbacks).
//
// # libjpeg-turbo (build tag turbojpeg)
//
// `go build -tags turbojpeg` (cgo; Debian: libturbojpeg0-dev, linked
// statically) decodes JPEG with TurboJPEG's tjDecompress2 into packed RGB:
// integer "islow" IDCT, fancy (triangle) chroma upsampling, warnings are
// errors. When the source is at least twice the planned new size on both
// axes it decodes in the DCT domain at the largest of 1/2, 1/4, 1/8 with
// stored size >= k * new size (in stored orientation), so the scaled image
// is at least the new size and the antialiased resampler makes the last
// step; 1920x1080 into 640x640 decodes at 960x540. The Geometry (and so
// box mapping) still describes the source size: the DCT scale is a step
// inside the resize. CMYK/YCCK files go to image/jpeg. The pixels differ from image/jpeg's (another IDCT and chroma
// upsampling, and the DCT-domain downscale): per channel, |difference| has
// mean <= 1.5, 99th percentile <= 8 and max <= 80 levels of 255 on the
// tests' images (TestJPEGMatchesImageJPEG); the build's
// DecoderIdentity differs, so its warehouses are other versions. The
// default build never needs a C compiler.
//
// # Output layout
//
// out is CHW: element (c, y, x) is at byte ((c*Height + y)*Width + x) * size,
// little-endian, with size 4 for F32, 2 for F16 and 1 for U8. Every byte is
// written.
//
// # Geometry
//
// PlanGeometry decides where the image lands (see Geometry):
//
//   - Letterbox: scale = min(tw/w, th/h) as an exact rational; the limiting
//     axis becomes exactly the target size, the other round-half-up(src *
//     scale), at least 1. Padding is (target - new) / 2 rounded down on each
//     axis (left/top), the remainder right/bottom. This is the original
//     capture tool's rule, computed in integers so no tie can round
//     differently. 1920x1080 into 384x384: 384x216 at (0, 84).
//   - Stretch: the new size is the target size, no padding.
//   - None: the source must already have the target size (ErrSizeMismatch).
//
// MapBox takes a box in displayed source pixels through the same geometry:
// x' = (x * ScaleX + PadX) / Width, likewise y, clamped to [0,1]. ScaleX is
// NewW/SrcW, the factor the pixels were actually scaled by. A box that is
// empty after clamping is reported as not ok so the caller can drop and
// count it.
//
// # Decoding and limits
//
// The format is chosen by magic bytes from this package's own table, never
// through image.Decode's global registry, so linking another package cannot
// change which decoder runs. Before any pixel is decoded the header size is
// checked against MaxSourceSide (65536) and MaxSourcePixels (2^26): a small
// file that announces a gigapixel image is refused with ErrImageTooLarge
// before a decoder allocates for it. Every failure caused by the bytes wraps
// ErrDecode (use errors.Is); a decoder panic on hostile input is recovered
// and reported as ErrDecode as well. GIF decodes the first frame only; if it
// covers only part of the logical screen the rest is black. The header size
// of a non-paletted PNG (its leading IHDR) and of a JPEG (its first SOF0-2)
// is read without allocating; anything else is left to the format's
// DecodeConfig (FuzzDecodeConfig checks they agree). jpegdec checks the
// frame size against the limit again before it allocates its planes.
//
// # Alpha
//
// Alpha is dropped, not composited: the result is the straight color the
// pixel stores, as the original tool's to_rgb8() did for its RGBA PNGs. For
// straight-alpha images (PNG RGBA -> image.NRGBA, paletted with tRNS) the
// R, G, B bytes are taken as they are, even where alpha is 0. Premultiplied
// images (image.RGBA with alpha < 255, e.g. TIFF with associated alpha) are
// un-premultiplied with color.NRGBAModel's formula first, so both
// representations of one picture give the same RGB; a fully transparent
// premultiplied pixel has no color left and becomes black. 16-bit channels
// keep their high byte. YCbCr (JPEG, lossy WebP) is converted with the
// integer formula of color.YCbCrToRGB.
//
// # Orientation
//
// For JPEG, the Orientation tag (0x0112) of IFD0 in the first Exif APP1
// segment is read by a small bounds-checked parser (both byte orders) and
// the pixels are rotated/flipped before resizing; values 5..8 swap width and
// height. DecodeConfig reports the displayed size, the one label boxes are
// given in. A missing, corrupt or out-of-range tag means 1 (as stored).
// Other formats are taken as stored.
//
// # Resampling
//
// A separable antialiased triangle (bilinear) filter in the style of Pillow
// and disintegration/imaging's Linear: output pixel v centred at source
// coordinate (v+0.5)*S/D - 0.5, weight max(0, 1 - |u-c|/scale) with scale =
// max(1, S/D), so a downscale averages every source pixel it covers instead
// of aliasing. The weights are derived in integer arithmetic (see
// axisWeights.prepare), quantized to 22 fractional bits and corrected so
// each output's weights sum to exactly 2^22; a flat region stays exactly
// flat. The horizontal pass runs first into an 8-bit intermediate, then the
// vertical pass; each rounds half up. A pass is skipped when its axis keeps
// its size, so an unscaled image passes through bit-exact. Weight tables are
// cached per Transformer and reused while consecutive images share sizes.
// For speed the weights are also kept zero-padded to one tap count per axis,
// and the inner loops for 2..8 taps are unrolled (resample_kernels.go,
// generated by gen_kernels.go); zero weights and the order of integer
// additions change no result, which TestResampleKernelsMatchReference checks
// against a plain loop over the exact supports.
// Tests compare the result against imaging.Resize(..., imaging.Linear).
//
// # Normalization
//
// Each channel has a 256-entry table built once per Transformer:
// value = (v/255 - Mean[c]) / Std[c] (or v/255 when Std is zero) in float64,
// rounded to float32, and for F16 that float32 rounded to binary16 (round
// to nearest even, x448/float16). Pad pixels go through the same table.
// U8 writes the resampled pixel v itself (and the pad value as it is); the
// table's float32 column is what a reader that normalizes a U8 image must
// produce, so a U8 image normalized through it equals the F32 output.
//
// # Determinism
//
//   - No floating point per pixel: pixels go through integer arithmetic and
//     lookup tables only (jpegdec's IDCTs included).
//   - The resampler weights are computed in integers; the few float
//     computations (normalization tables, MapBox) contain no multiply-add
//     that a compiler could fuse into an FMA (the Go spec allows fusion
//     unless a product is explicitly converted, which MapBox does).
//   - No map iteration, goroutines or timing inside; a Transformer is
//     single-threaded and its cached state never changes a result (tests
//     interleave sizes and compare against fresh Transformers).
//   - Everything that decides pixels is named by DecoderIdentity (x/image
//     and float16 versions, this package's pixel code version, the JPEG
//     decoder: jpegdec's version and settings, or the libjpeg-turbo release,
//     its settings and the DCT scaling rule), which goes into the warehouse
//     version key. The Go toolchain is not: PNG and GIF decode exactly by
//     spec, the common JPEGs are jpegdec's, and TestStdDecoderCanary pins
//     what image/jpeg, image/png and image/gif make of a checked-in corpus
//     (progressive and CMYK JPEG among it), so a Go upgrade that changes a
//     pixel fails the tests instead of passing silently. Bump pixelCodeVersion with any
//     change that can alter an output byte; testdata/golden holds sha256
//     sums of outputs that catch it (outputs.sha256 for the default build,
//     outputs-turbojpeg.sha256 for the turbojpeg build).
//   - libjpeg-turbo's SIMD code (AVX2, SSE2, NEON) gives the same bytes as
//     its C code for the integer IDCTs, upsampling and color conversion
//     used; TestTurboJPEGSIMDIndependent compares against a run with
//     JSIMD_FORCENONE=1. The library is linked statically and its release
//     checked against the installed one, so the version named is the code
//     that runs.
package transforms
