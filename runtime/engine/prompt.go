package engine

import (
	"fmt"
	"time"

	"tfc/runtime/chattemplate"
	"tfc/runtime/image"
	"tfc/runtime/model"
	"tfc/runtime/positions"
	"tfc/runtime/tokenizer"
)

// Frontend turns a conversation and its images into a Prompt, as the checkpoint's Hugging Face
// processor does: template, tokenize, one placeholder id per vision row.
type Frontend struct {
	Tok      *tokenizer.Tokenizer
	Template *chattemplate.Template
	Image    image.Config
	Limits   image.Limits
	// MaxTextBytes, when set, refuses a rendered prompt longer than this before it is encoded.
	MaxTextBytes int
	// OnDecoded, when set, is called with an image's 1-based index between its decode and its preprocessing.
	OnDecoded func(index int)
}

// LoadFrontend reads a checkpoint directory's tokenizer, chat template and image processor config.
func LoadFrontend(dir string) (*Frontend, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	tmpl, err := chattemplate.Load(dir)
	if err != nil {
		return nil, err
	}
	ic, err := image.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	return &Frontend{Tok: tok, Template: tmpl, Image: ic, Limits: image.DefaultLimits()}, nil
}

// Fits checks that the checkpoint's image processor cuts the patches the family's vision tower
// reads, before any request is served.
func (f *Frontend) Fits(info model.Info) error {
	if info.PixelCols == 0 {
		return nil
	}
	if rule := f.Image.Rule; string(rule) != info.Image {
		return fmt.Errorf("preprocessor_config.json names %s (image rule %s), but the family's image rule is %q; the checkpoint's preprocessor_config.json does not belong to its config.json", rule.Processor(), rule, info.Image)
	}
	// Pixtral's processor cuts patches in raster order and leaves the merge to the model
	if f.Image.Rule == image.RulePixtral {
		if got := f.Image.PatchDim(); got != info.PixelCols {
			return fmt.Errorf("preprocessor_config.json cuts patches of %d values (patch_size %d), but the vision tower reads %d values a patch; the checkpoint's preprocessor_config.json does not belong to its config.json", got, f.Image.PatchSize, info.PixelCols)
		}
		return nil
	}
	if got := f.Image.PatchDim(); got != info.PixelCols || f.Image.MergeSize != info.Merge {
		return fmt.Errorf("preprocessor_config.json cuts patches of %d values (patch_size %d, temporal_patch_size %d) merged %d×%d, but the vision tower reads %d values a patch merged %d×%d; the checkpoint's preprocessor_config.json does not belong to its config.json",
			got, f.Image.PatchSize, f.Image.TemporalPatchSize, f.Image.MergeSize, f.Image.MergeSize, info.PixelCols, info.Merge, info.Merge)
	}
	return nil
}

// Images decodes and preprocesses encoded images; errors name the image by its 1-based index.
func (f *Frontend) Images(files [][]byte) ([]*image.Patches, error) {
	out, _, err := f.TimedImages(files)
	return out, err
}

// ImageTimes are the time images took to decode and to preprocess.
type ImageTimes struct{ Decode, Preprocess time.Duration }

// TimedImages is Images with the time each stage took.
func (f *Frontend) TimedImages(files [][]byte) ([]*image.Patches, ImageTimes, error) {
	imgs, decode, err := f.Decode(files)
	if err != nil {
		return nil, ImageTimes{Decode: decode}, err
	}
	out, t, err := f.TimedPictures(imgs)
	t.Decode = decode
	return out, t, err
}

// Decode decodes images to RGB under the front end's limits, with the time it took.
func (f *Frontend) Decode(files [][]byte) ([]*image.RGB, time.Duration, error) {
	t0 := time.Now()
	imgs := make([]*image.RGB, len(files))
	for i, data := range files {
		img, err := image.Decode(i+1, data, f.Limits)
		if err != nil {
			return nil, time.Since(t0), err
		}
		imgs[i] = img
	}
	return imgs, time.Since(t0), nil
}

// TimedPictures preprocesses images already decoded (a rendered PDF page), with the time it took.
func (f *Frontend) TimedPictures(imgs []*image.RGB) ([]*image.Patches, ImageTimes, error) {
	var t ImageTimes
	out := make([]*image.Patches, len(imgs))
	for i, img := range imgs {
		if f.OnDecoded != nil {
			f.OnDecoded(i + 1)
		}
		t0 := time.Now()
		p, err := image.Preprocess(img, f.Image)
		t.Preprocess += time.Since(t0)
		if err != nil {
			return nil, t, fmt.Errorf("image %d: %w", i+1, err)
		}
		out[i] = p
	}
	return out, t, nil
}

// TextTooLongError refuses a prompt whose text is longer than the context could hold, before it
// is encoded (encoding a very long text costs seconds and memory for nothing).
type TextTooLongError struct{ Bytes, Limit int }

func (e *TextTooLongError) Error() string {
	return fmt.Sprintf("the prompt's text is %d bytes, more than this model's context can hold as tokens (%d bytes at the most); shorten it", e.Bytes, e.Limit)
}

// Build renders messages (a JSON array) with the generation prompt, tokenizes the text and
// expands each image placeholder token to the image's vision rows.
func (f *Frontend) Build(messagesJSON []byte, imgs []*image.Patches, imageToken, merge int, o chattemplate.Options) (Prompt, string, error) {
	text, err := f.Template.RenderJSON(messagesJSON, o)
	if err != nil {
		return Prompt{}, "", err
	}
	if f.MaxTextBytes > 0 && len(text) > f.MaxTextBytes {
		return Prompt{}, "", &TextTooLongError{Bytes: len(text), Limit: f.MaxTextBytes}
	}
	ids := f.Tok.Encode(text)
	var p Prompt
	switch {
	case len(imgs) == 1:
		p.Pixels = imgs[0].Pixels // one image's patches are the prompt's, not copied
	case len(imgs) > 1:
		n := 0
		for _, im := range imgs {
			n += len(im.Pixels)
		}
		p.Pixels = make([]float32, 0, n)
	}
	img := 0
	for _, id := range ids {
		if id != imageToken {
			p.IDs = append(p.IDs, int32(id))
			continue
		}
		if img >= len(imgs) {
			return Prompt{}, "", fmt.Errorf("the prompt names more images than the %d sent", len(imgs))
		}
		g := imgs[img].GridTHW
		for k := 0; k < positions.MergedRows(g, merge); k++ {
			p.IDs = append(p.IDs, int32(imageToken))
		}
		p.Grids = append(p.Grids, g)
		if len(imgs) > 1 {
			p.Pixels = append(p.Pixels, imgs[img].Pixels...)
		}
		img++
	}
	if img != len(imgs) {
		return Prompt{}, "", fmt.Errorf("%d images sent, the prompt has places for %d", len(imgs), img)
	}
	return p, text, nil
}
