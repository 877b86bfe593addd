package identity

import (
	"strings"
	"unicode/utf8"
)

// UnprintableName is how human output shows a recorded name it cannot
// print (cli.md §1.5).
const UnprintableName = "a recorded name that cannot be printed (control characters, or not a name with its source)"

// Words renders a recorded program name as every human output names a
// program (cli.md §1.5): `<by> (from REALM_OPERATOR, via <channel>)`,
// `<by> (from the OS user, via …)`, `<by> (as stated, via …)`. A name with
// control characters, or without a known source, is UnprintableName; one
// over MaxNameLen characters is cut and ends in `…[truncated]`. A holder
// without a channel (an embedding program's older record) leaves it out.
// channel is printed as given: callers escape what they did not check.
func Words(by, bySource, channel string) string {
	if by == "" || strings.ContainsFunc(by, isControl) {
		return UnprintableName
	}
	var from string
	switch bySource {
	case "ambient":
		from = "from REALM_OPERATOR"
	case "derived":
		from = "from the OS user"
	case "stated":
		from = "as stated"
	default:
		return UnprintableName
	}
	if utf8.RuneCountInString(by) > MaxNameLen {
		by = string([]rune(by)[:MaxNameLen]) + "…[truncated]"
	}
	if channel != "" {
		from += ", via " + channel
	}
	return by + " (" + from + ")"
}

// isControl is a character no name may show: C0, DEL, C1, and the line
// and paragraph separators.
func isControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029
}
