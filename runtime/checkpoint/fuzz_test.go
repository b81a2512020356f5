package checkpoint

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func seedFile(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

// FuzzReadHeader feeds arbitrary files to the header parser: it must never panic, and what
// it accepts must describe tensors that lie inside the file, in order, without gaps.
func FuzzReadHeader(f *testing.F) {
	f.Add(seedFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}}`, 8))
	f.Add(seedFile(`{"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[0],"data_offsets":[4,4]}}`, 4))
	f.Add(seedFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8))
	f.Add(seedFile(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, 8))
	f.Add(seedFile(`{"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}}`, 0))
	f.Add(seedFile(`{"a":1}`, 0))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255, '{', '}'})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'})
	f.Add([]byte{1, 2})
	f.Fuzz(func(t *testing.T, file []byte) {
		h, err := readHeader(bytes.NewReader(file), int64(len(file)), "fuzz.safetensors")
		if err != nil {
			if _, ok := err.(*FileError); !ok {
				t.Fatalf("error %T is not a *FileError: %v", err, err)
			}
			return
		}
		dataLen := int64(len(file)) - h.DataStart
		var next int64
		for _, e := range h.Entries {
			if e.Begin != next || e.End < e.Begin || e.End > dataLen {
				t.Fatalf("accepted tensor %s at [%d, %d) after %d in %d data bytes", e.Name, e.Begin, e.End, next, dataLen)
			}
			n := int64(e.DType.Size())
			for _, d := range e.Shape {
				n *= int64(d)
			}
			if n != e.End-e.Begin {
				t.Fatalf("accepted tensor %s of shape %v %s in %d bytes", e.Name, e.Shape, e.DType, e.End-e.Begin)
			}
			next = e.End
		}
		if next != dataLen {
			t.Fatalf("accepted a file with %d data bytes whose tensors end at %d", dataLen, next)
		}
	})
}

// FuzzParseConfig feeds arbitrary text to the config parser and reads it back by path: no
// panics, and every refusal is a *ConfigError.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"text_config": {"hidden_size": 8, "rope_scaling": {"mrope_section": [1, 1, 2]}}, "hidden_size": 8.0}`))
	f.Add([]byte(`{"a": {"b": [1, 2,]}}`))
	f.Add([]byte(`{"a": null, "b": [[1], {"c": true}], "d": 1e999}`))
	f.Add([]byte("{\n\"a\": \"\\ud800\"\n}"))
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := ParseConfig("config.json", text)
		if err != nil {
			if _, ok := err.(*ConfigError); !ok {
				t.Fatalf("error %T is not a *ConfigError: %v", err, err)
			}
			return
		}
		for _, path := range []string{"a", "a.b", "a.b.0", "text_config.hidden_size|hidden_size", "b.1.c", "d"} {
			c.Has(path)
			c.Int(path)
			c.Float(path)
			c.Bool(path)
			c.String(path)
			c.IntList(path)
			c.FloatList(path)
			c.IntOrList(path)
		}
		Pick(c, []string{"qwen2_vl"})
	})
}
