package sources

// NaturalLess orders names so that digit runs compare as numbers: run_2
// before run_10, frame_9 before frame_10. Digit runs are compared by value
// without converting them to integers (leading zeros stripped, then by
// length, then digit by digit), so arbitrarily long runs such as
// millisecond timestamps never overflow. Other bytes compare as bytes;
// since the digits 0-9 are contiguous in ASCII, a digit run against a
// non-digit byte compares the same whichever digit it starts with, which
// keeps the order transitive. Names equal under this rule (run_02 and
// run_2) fall back to plain string order, so the order is total.
func NaturalLess(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if !isDigit(ca) || !isDigit(cb) {
			if ca != cb {
				return ca < cb
			}
			i++
			j++
			continue
		}
		ea, eb := digitRunEnd(a, i), digitRunEnd(b, j)
		if c := compareDigits(a[i:ea], b[j:eb]); c != 0 {
			return c < 0
		}
		i, j = ea, eb
	}
	if rest := (len(a) - i) - (len(b) - j); rest != 0 {
		return rest < 0
	}
	return a < b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRunEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// compareDigits compares two digit strings by numeric value.
func compareDigits(x, y string) int {
	x, y = trimLeadingZeros(x), trimLeadingZeros(y)
	if len(x) != len(y) {
		if len(x) < len(y) {
			return -1
		}
		return 1
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func trimLeadingZeros(s string) string {
	for len(s) > 0 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// NaturalCompare is NaturalLess as a three-way comparison for
// slices.SortFunc. Every source orders runs, episodes and files with it.
func NaturalCompare(a, b string) int {
	switch {
	case NaturalLess(a, b):
		return -1
	case NaturalLess(b, a):
		return 1
	}
	return 0
}
