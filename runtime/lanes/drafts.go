package lanes

// Copy drafts: the tokens that followed the latest earlier occurrence of the sequence's last
// n-gram are proposed as the next ones; OCR output copies its input often, so they are often right.
const (
	draftMaxGram = 3
	draftMinGram = 2
)

// propose returns up to k tokens that followed the most recent earlier occurrence of the longest
// suffix n-gram (draftMaxGram down to draftMinGram) of ids.
func propose(ids []int32, k int) []int32 {
	if k <= 0 {
		return nil
	}
	for n := draftMaxGram; n >= draftMinGram; n-- {
		if len(ids) <= n {
			continue
		}
		tail := ids[len(ids)-n:]
		for start := len(ids) - n - 1; start >= 0; start-- {
			if !equal(ids[start:start+n], tail) {
				continue
			}
			follow := ids[start+n : min(len(ids), start+n+k)]
			if len(follow) > 0 {
				return append([]int32(nil), follow...)
			}
		}
	}
	return nil
}

func equal(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
