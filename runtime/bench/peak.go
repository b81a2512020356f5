package bench

import "strings"

// Peak is a card's dense BF16 matrix rate and memory bandwidth as its maker lists them.
type Peak struct {
	Card   string  `json:"card"`
	TFLOPS float64 `json:"bf16_tflops"`
	TBps   float64 `json:"tb_per_s"`
}

// peaks are the cards a profile can give shares of, by a part of the device's name, most
// specific first.
var peaks = []struct {
	name string
	Peak
}{
	{"H100 PCIe", Peak{"H100 PCIe", 756, 2.0}},
	{"H100 NVL", Peak{"H100 NVL", 835, 3.9}},
	{"H100", Peak{"H100 SXM", 989, 3.35}},
	{"H200", Peak{"H200", 989, 4.8}},
	{"MI300X", Peak{"MI300X", 1307, 5.3}},
}

// peakOf is the listed peak of the device described as desc (a backend's Describe), if known.
func peakOf(desc string) (Peak, bool) {
	for _, p := range peaks {
		if strings.Contains(desc, p.name) {
			return p.Peak, true
		}
	}
	return Peak{}, false
}
