package validate

import (
	"fmt"
	"strings"
)

// Describe says a limit in words, as inspect and the viewer show it:
// "max_count 3, max_ratio 0.05 (fail)", or "no limit".
func (l Limit) Describe() string {
	var parts []string
	if l.MaxCount != nil {
		parts = append(parts, fmt.Sprintf("max_count %d", *l.MaxCount))
	}
	if l.MaxRatio != nil {
		parts = append(parts, fmt.Sprintf("max_ratio %g", *l.MaxRatio))
	}
	if len(parts) == 0 {
		return "no limit"
	}
	return strings.Join(parts, ", ") + " (" + string(l.Action.resolved()) + ")"
}
