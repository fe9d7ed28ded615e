package console

// maxDiffLines bounds each side of a diff: the table of common
// subsequence lengths is (a+1)×(b+1) entries.
const maxDiffLines = 1000

// diffLine is one line of a diff: Op is ' ' (in both), '-' (only in the
// old) or '+' (only in the new).
type diffLine struct {
	Op   string
	Text string
}

// diffLines is the line diff of a and b along a longest common
// subsequence: removals before additions at each change.
func diffLines(a, b []string) []diffLine {
	n, m := len(a), len(b)
	// lcs[i][j] is the LCS length of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	out := make([]diffLine, 0, max(n, m))
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case a[i] == b[j]:
			out = append(out, diffLine{" ", a[i]})
			i, j = i+1, j+1
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{"-", a[i]})
			i++
		default:
			out = append(out, diffLine{"+", b[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{"-", a[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{"+", b[j]})
	}
	return out
}
