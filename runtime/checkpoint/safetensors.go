package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"unicode/utf8"
)

// DType is the element type of a tensor as stored in a safetensors file.
type DType uint8

const (
	BF16 DType = iota + 1
	F16
	F32
)

// Size is the number of bytes of one element.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	}
	return 0
}

// String is the dtype's name as safetensors spells it.
func (d DType) String() string {
	switch d {
	case BF16:
		return "BF16"
	case F16:
		return "F16"
	case F32:
		return "F32"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// ParseDType reads a safetensors dtype name; only BF16, F16 and F32 are accepted.
func ParseDType(name string) (DType, error) {
	switch name {
	case "BF16":
		return BF16, nil
	case "F16":
		return F16, nil
	case "F32":
		return F32, nil
	}
	return 0, fmt.Errorf("dtype %s is not read by tfc; convert the checkpoint to BF16, F16 or F32", name)
}

// maxHeaderBytes bounds the JSON header, as the reference safetensors reader does.
const maxHeaderBytes = 100 << 20

// FileError is a refusal of one file of a checkpoint, naming the tensor when one is at fault.
type FileError struct {
	File   string // base name inside the checkpoint directory
	Tensor string // empty when the file as a whole is at fault
	Msg    string
}

func (e *FileError) Error() string {
	if e.Tensor != "" {
		return fmt.Sprintf("%s: tensor %s: %s", e.File, e.Tensor, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// entry is one tensor of a safetensors header; offsets count from the start of the data section.
type entry struct {
	Name       string
	DType      DType
	Shape      []int
	Begin, End int64
}

// shardHeader is the parsed and validated header of one safetensors file.
type shardHeader struct {
	File      string
	DataStart int64 // 8 + header length
	Metadata  map[string]string
	Entries   []entry // sorted by offset
}

// rawEntry is a header entry as written in the JSON.
type rawEntry struct {
	DType   *string `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Offsets []int64 `json:"data_offsets"`
}

// readHeader parses and validates the header of a safetensors file of size bytes read through r.
func readHeader(r io.ReaderAt, size int64, file string) (*shardHeader, error) {
	fail := func(tensor, format string, args ...any) error {
		return &FileError{File: file, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	if size < 8 {
		return nil, fail("", "the file has %d bytes, fewer than the 8-byte header length of a safetensors file; it is truncated, download it again", size)
	}
	var lenBuf [8]byte
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fail("", "reading the header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) {
		return nil, fail("", "the header length %d runs past the end of the file (%d bytes); the file is truncated or is not safetensors", n, size)
	}
	if n > maxHeaderBytes {
		return nil, fail("", "the header length %d is over the %d-byte limit; the file is not safetensors", n, maxHeaderBytes)
	}
	if n < 2 {
		return nil, fail("", "the header is %d bytes long, too short for a JSON object; the file is corrupt", n)
	}
	text := make([]byte, n)
	if _, err := r.ReadAt(text, 8); err != nil {
		return nil, fail("", "reading the %d-byte header: %v", n, err)
	}
	if !utf8.Valid(text) {
		return nil, fail("", "the header is not UTF-8; the file is corrupt")
	}
	h := &shardHeader{File: file, DataStart: 8 + int64(n)}
	dataLen := size - h.DataStart

	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fail("", "the header is not a JSON object; the file is corrupt")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fail("", "the header is not valid JSON: %v", err)
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fail("", "the header is not valid JSON: key %v is not a string", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fail(name, "the header is not valid JSON: %v", err)
		}
		if seen[name] {
			return nil, fail(name, "the header lists it twice; the file is corrupt")
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := json.Unmarshal(raw, &h.Metadata); err != nil {
				return nil, fail("", "__metadata__ is not an object of strings: %v", err)
			}
			continue
		}
		e, err := parseEntry(name, raw)
		if err != nil {
			return nil, fail(name, "%v", err)
		}
		h.Entries = append(h.Entries, e)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fail("", "the header is not a complete JSON object; the file is corrupt")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fail("", "the header has data after its JSON object; the file is corrupt")
	}

	sort.SliceStable(h.Entries, func(i, j int) bool {
		a, b := h.Entries[i], h.Entries[j]
		if a.Begin != b.Begin {
			return a.Begin < b.Begin
		}
		return a.End < b.End
	})
	var next int64
	prev := ""
	for i, e := range h.Entries {
		switch {
		case e.Begin < next:
			return nil, fail(e.Name, "its bytes [%d, %d) overlap those of tensor %s, which end at %d; the file is corrupt", e.Begin, e.End, prev, next)
		case e.Begin > next:
			return nil, fail(e.Name, "there are %d unclaimed bytes before it (at %d); the file is corrupt", e.Begin-next, next)
		}
		if e.End > dataLen {
			after := ""
			if rest := len(h.Entries) - i - 1; rest > 0 {
				after = fmt.Sprintf(" (and %d more after it)", rest)
			}
			return nil, fail(e.Name, "its bytes end at %d of the data section but the file holds only %d data bytes%s; the file is truncated, download it again", e.End, dataLen, after)
		}
		next, prev = e.End, e.Name
	}
	if next != dataLen {
		return nil, fail("", "%d bytes follow the last tensor; the file is corrupt", dataLen-next)
	}
	return h, nil
}

// parseEntry checks one tensor entry of a header: a known dtype and a byte size that matches its shape.
func parseEntry(name string, raw json.RawMessage) (entry, error) {
	if name == "" {
		return entry{}, errors.New("a tensor has an empty name; the file is corrupt")
	}
	var re rawEntry
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&re); err != nil {
		return entry{}, fmt.Errorf("entry is not {dtype, shape, data_offsets}: %v", strings.TrimPrefix(err.Error(), "json: "))
	}
	if re.DType == nil || re.Shape == nil || re.Offsets == nil {
		return entry{}, errors.New("entry lacks dtype, shape or data_offsets; the file is corrupt")
	}
	dt, err := ParseDType(*re.DType)
	if err != nil {
		return entry{}, err
	}
	if len(re.Offsets) != 2 {
		return entry{}, fmt.Errorf("data_offsets has %d numbers, want 2; the file is corrupt", len(re.Offsets))
	}
	begin, end := re.Offsets[0], re.Offsets[1]
	if begin < 0 || end < begin {
		return entry{}, fmt.Errorf("data_offsets [%d, %d] are not an interval; the file is corrupt", begin, end)
	}
	shape := make([]int, len(re.Shape))
	numel := uint64(1)
	overflow := false
	for i, d := range re.Shape {
		if d < 0 || int64(int(d)) != d {
			return entry{}, fmt.Errorf("shape %v has a negative or huge dimension; the file is corrupt", re.Shape)
		}
		shape[i] = int(d)
		hi, lo := bits.Mul64(numel, uint64(d))
		overflow = overflow || hi != 0
		numel = lo
	}
	hi, nbytes := bits.Mul64(numel, uint64(dt.Size()))
	if overflow || hi != 0 || nbytes != uint64(end-begin) {
		return entry{}, fmt.Errorf("shape %v of %s needs %s bytes but data_offsets [%d, %d] hold %d; the file is corrupt", shape, dt, byteCount(numel, dt, overflow || hi != 0), begin, end, end-begin)
	}
	return entry{Name: name, DType: dt, Shape: shape, Begin: begin, End: end}, nil
}

func byteCount(numel uint64, dt DType, overflow bool) string {
	if overflow {
		return "more than 2^64"
	}
	return fmt.Sprint(numel * uint64(dt.Size()))
}
