package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// Stored is one tensor to write into a safetensors file: its dtype's safetensors name, its shape
// and its little-endian bytes.
type Stored struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Encode writes tensors as one safetensors file, in the order given, with metadata when non-nil.
func Encode(tensors []Stored, metadata map[string]string) []byte {
	header := map[string]any{}
	if metadata != nil {
		header["__metadata__"] = metadata
	}
	var data bytes.Buffer
	for _, t := range tensors {
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int{data.Len(), data.Len() + len(t.Data)}}
		data.Write(t.Data)
	}
	text, err := json.Marshal(header)
	if err != nil {
		panic(err) // strings, ints and int slices always marshal
	}
	return EncodeRaw(text, data.Bytes())
}

// EncodeRaw frames a header text and data as a safetensors file, padding the header with spaces
// to a multiple of 8 bytes as the reference writer does.
func EncodeRaw(header, data []byte) []byte {
	pad := (8 - len(header)%8) % 8
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(header)+pad))
	out.Write(header)
	out.Write(bytes.Repeat([]byte{' '}, pad))
	out.Write(data)
	return out.Bytes()
}
