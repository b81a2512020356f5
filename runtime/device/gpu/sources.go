package gpu

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unsafe"

	"tfc/runtime/device"
)

// Entry is one kernel of a family's source: the family's .hip file and the kernel's schedule.
type Entry struct {
	Family   string // base name of the .hip file
	Schedule device.Schedule
}

// KernelTable reads the schedule beside every family's .hip in srcs (device.ScheduleExt) and maps
// each kernel name to its family and schedule; the kernel text is not read. A kernel in two
// families, or a schedule without its .hip, is an error.
func KernelTable(srcs fs.FS) (map[string]Entry, error) {
	files, err := fs.Glob(srcs, "*"+device.ScheduleExt)
	if err != nil {
		return nil, err
	}
	table := map[string]Entry{}
	for _, f := range files {
		family := strings.TrimSuffix(f, device.ScheduleExt) + ".hip"
		if _, err := fs.Stat(srcs, family); err != nil {
			return nil, fmt.Errorf("%s has no %s beside it", f, family)
		}
		data, err := fs.ReadFile(srcs, f)
		if err != nil {
			return nil, err
		}
		ss, err := device.DecodeSchedules(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, s := range ss {
			if prev, ok := table[s.Kernel]; ok {
				return nil, fmt.Errorf("kernel %s is scheduled in both %s and %s", s.Kernel, prev.Family, family)
			}
			table[s.Kernel] = Entry{Family: family, Schedule: s}
		}
	}
	return table, nil
}

// Replace returns srcs with the family file name (a family's .hip, e.g. "qwen2vl.hip") and its
// schedule holding src instead, and the kernel table of the result; srcs itself is unchanged.
// The new source must schedule a kernel, and none that another family schedules.
func Replace(srcs fs.FS, name string, src device.Source) (fs.FS, map[string]Entry, error) {
	if path.Ext(name) != ".hip" || strings.Contains(name, "/") {
		return nil, nil, fmt.Errorf("%s is not a family's .hip file", name)
	}
	files, err := src.Files(name)
	if err != nil {
		return nil, nil, err
	}
	out := memFS{}
	for _, pattern := range []string{"*.h", "*.hip", "*" + device.ScheduleExt} {
		names, err := fs.Glob(srcs, pattern)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range names {
			if out[n], err = fs.ReadFile(srcs, n); err != nil {
				return nil, nil, err
			}
		}
	}
	for n, data := range files {
		out[n] = bytes.Clone(data)
	}
	table, err := KernelTable(out)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range table {
		if e.Family == name {
			return out, table, nil
		}
	}
	return nil, nil, fmt.Errorf("the source given for %s schedules no kernel", name)
}

// SameSource reports whether srcs holds exactly src as the family file name and its schedule.
func SameSource(srcs fs.FS, name string, src device.Source) bool {
	files, err := src.Files(name)
	if err != nil {
		return false
	}
	for n, want := range files {
		if have, err := fs.ReadFile(srcs, n); err != nil || !bytes.Equal(have, want) {
			return false
		}
	}
	return true
}

// memFS is a flat set of files held in memory.
type memFS map[string][]byte

func (m memFS) Open(name string) (fs.File, error) {
	data, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{info: memInfo{name: name, size: int64(len(data))}, r: bytes.NewReader(data)}, nil
}

func (m memFS) ReadFile(name string) ([]byte, error) {
	data, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(data), nil
}

func (m memFS) Glob(pattern string) ([]string, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, err
	}
	var out []string
	for n := range m {
		if ok, _ := path.Match(pattern, n); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

type memFile struct {
	info memInfo
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *memFile) Close() error               { return nil }

type memInfo struct {
	name string
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return 0o444 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }

// SourceFiles are the files a family's build reads: every header, then its .hip.
func SourceFiles(srcs fs.FS, family string) ([]string, error) {
	hs, err := fs.Glob(srcs, "*.h")
	if err != nil {
		return nil, err
	}
	sort.Strings(hs)
	return append(hs, family), nil
}

// CacheKey hashes the compiler's version text, the target and every source file the family's
// build reads.
func CacheKey(version, target string, srcs fs.FS, family string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "compiler %s\ntarget %s\nfamily %s\n", version, target, family)
	names, err := SourceFiles(srcs, family)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		data, err := fs.ReadFile(srcs, n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Stage writes the family's source files into dir and returns the path of its .hip there.
func Stage(srcs fs.FS, family, dir string) (string, error) {
	names, err := SourceFiles(srcs, family)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		data, err := fs.ReadFile(srcs, n)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(n)), data, 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, path.Base(family)), nil
}

// Cache keeps built code objects in a folder by key; the zero Cache keeps nothing.
type Cache struct {
	Dir string
	Ext string // file extension, e.g. ".cubin"
}

// UserCache is the folder <user cache>/tfc/<kind>, or the zero Cache when there is none.
func UserCache(kind, ext string) Cache {
	d, err := os.UserCacheDir()
	if err != nil {
		return Cache{}
	}
	return Cache{Dir: filepath.Join(d, "tfc", kind), Ext: ext}
}

// Load returns the object cached under key, if any.
func (c Cache) Load(key string) ([]byte, bool) {
	if c.Dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(c.Dir, key+c.Ext))
	return data, err == nil
}

// Store caches data under key, written to a temporary name and renamed so that a reader never
// sees a partial object. A cache that cannot be written is skipped.
func (c Cache) Store(key string, data []byte) {
	if c.Dir == "" || os.MkdirAll(c.Dir, 0o755) != nil {
		return
	}
	dst := filepath.Join(c.Dir, key+c.Ext)
	tmp, err := os.CreateTemp(c.Dir, key+".*.tmp")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), dst) != nil {
		os.Remove(tmp.Name())
	}
}

// PrecisionMacro is the line a family's source starts with in p, or "" in F32Precision (the
// headers default TFC_BF16 to 0).
func PrecisionMacro(p device.Precision) string {
	if p == device.BF16Precision {
		return "#define TFC_BF16 1\n"
	}
	return ""
}

// PagedMMAMacro is the line that builds the tensor-core cached attention with its own grid
// (Backend.PagedMMA; kernels/tfc_attention.h).
const PagedMMAMacro = "#define TFC_PAGED_MMA 2\n"

// WithPrecision returns srcs with the family file starting with p's macro line (and
// PagedMMAMacro with pagedMMA), so that the build, and its cache key, see them.
func WithPrecision(srcs fs.FS, family string, p device.Precision, pagedMMA bool) (fs.FS, error) {
	out := memFS{}
	names, err := SourceFiles(srcs, family)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if out[n], err = fs.ReadFile(srcs, n); err != nil {
			return nil, err
		}
	}
	head := PrecisionMacro(p)
	if pagedMMA {
		head += PagedMMAMacro
	}
	out[family] = append([]byte(head), out[family]...)
	return out, nil
}

// RoundF32ToBF16 rounds the little-endian float32 values of host to BF16 in place; a NaN is kept
// as written (the contract's poison stays recognisable).
func RoundF32ToBF16(host []byte) {
	if littleEndian && len(host) >= 4 { // the values in place, not decoded and encoded one by one
		w := unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(host))), len(host)/4)
		for i, x := range w {
			if x == x {
				w[i] = device.RoundBF16(x)
			}
		}
		return
	}
	for i := 0; i+4 <= len(host); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(host[i:]))
		if x == x {
			binary.LittleEndian.PutUint32(host[i:], math.Float32bits(device.RoundBF16(x)))
		}
	}
}
