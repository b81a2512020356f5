package check

import "sort"

// suggest returns the candidate closest to name when it is a likely typo (at most one edit,
// or one per three letters, counting a swap of neighbours as one), else "".
func suggest(name string, candidates []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	sort.Strings(candidates)
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := editDistance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance: insertions, deletions, substitutions
// and swaps of adjacent letters.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// didYouMean is "; did you mean X?" for a close candidate, else "".
func didYouMean(name string, candidates []string) string {
	if s := suggest(name, candidates); s != "" {
		return "; did you mean " + s + "?"
	}
	return ""
}
