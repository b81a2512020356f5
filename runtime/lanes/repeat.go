package lanes

// A repetition is a tail of the output made of one period of at most repMaxPeriod tokens,
// repeated at least max(repMinCount, ceil(repMinSpan/period)) times: 128 copies of one token (a
// page of dots), 64 of a pair, 8 of a 16-token line. Shorter runs are left alone, so an HTML row
// of a dozen empty cells or a rule of dashes under a heading does not stop a page.
const (
	repMaxPeriod = 64
	repMinCount  = 8
	repMinSpan   = 128
)

// Repeats reports whether out ends in a repetition.
func Repeats(out []int32) bool {
	for p := 1; p <= repMaxPeriod; p++ {
		k := max(repMinCount, (repMinSpan+p-1)/p)
		n := k * p
		if n > len(out) {
			continue
		}
		tail := out[len(out)-n:]
		same := true
		for i := p; i < n; i++ {
			if tail[i] != tail[i-p] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}
