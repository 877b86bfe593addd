package template

import (
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/realm-go/realm/pkg/condition"
)

// filterFunc transforms a value; ok=false means the filter was given a kind
// it does not accept (the whole expression is then left as written).
type filterFunc func(v any, args []string, s Scope) (any, bool)

// filters is the table of the 34 documented filters (§8.2).
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"bullets":       fBullets,
		"join":          fJoin,
		"default":       fDefault,
		"upper":         textFilter(strings.ToUpper),
		"lower":         textFilter(strings.ToLower),
		"capitalize":    textFilter(capitalize),
		"truncate":      fTruncate,
		"pluck":         fPluck,
		"count":         fCount,
		"limit":         fLimit,
		"compact":       fCompact,
		"round":         fRound,
		"floor":         numFilter(math.Floor),
		"ceil":          numFilter(math.Ceil),
		"abs":           numFilter(math.Abs),
		"number_format": fNumberFormat,
		"percent":       fPercent,
		"replace":       fReplace,
		"yesno":         fYesNo,
		"and_join":      fAndJoin,
		"trim":          textFilter(strings.TrimSpace),
		"first":         fFirst,
		"last":          fLast,
		"sum":           fSum,
		"flatten":       fFlatten,
		"split":         fSplit,
		"sort":          fSort,
		"unique":        fUnique,
		"title":         textFilter(title),
		"code":          textFilter(upperSnake),
		"indent":        fIndent,
		"date":          fDate,
		"from_now":      fFromNow,
		"duration":      fDuration,
	}
}

// FilterNames returns the names of the supported filters, sorted.
func FilterNames() []string {
	names := make([]string, 0, len(filters))
	for n := range filters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func arg(args []string, i int, def string) string {
	if i < len(args) {
		return args[i]
	}
	return def
}

func intArg(args []string, i int, def int) (int, bool) {
	if i >= len(args) {
		return def, true
	}
	n, err := strconv.Atoi(args[i])
	return n, err == nil
}

// asList accepts []any and any other Go slice or array.
func asList(v any) ([]any, bool) {
	if l, ok := v.([]any); ok {
		return l, true
	}
	if v == nil {
		return nil, false
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, true
}

func textFilter(fn func(string) string) filterFunc {
	return func(v any, _ []string, _ Scope) (any, bool) {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		return fn(s), true
	}
}

func numFilter(fn func(float64) float64) filterFunc {
	return func(v any, _ []string, _ Scope) (any, bool) {
		f, ok := condition.ToFloat(v)
		if !ok {
			return nil, false
		}
		return fn(f), true
	}
}

func texts(l []any) []string {
	out := make([]string, len(l))
	for i, x := range l {
		out[i] = ToText(x)
	}
	return out
}

func fBullets(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok || len(l) == 0 {
		return nil, false
	}
	lines := texts(l)
	for i := range lines {
		lines[i] = "• " + lines[i]
	}
	return strings.Join(lines, "\n"), true
}

func fJoin(v any, args []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	return strings.Join(texts(l), arg(args, 0, ", ")), true
}

func fDefault(v any, args []string, _ Scope) (any, bool) {
	if v == missing {
		return arg(args, 0, ""), true
	}
	return v, true
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

func title(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		if start && !unicode.IsSpace(r) {
			r = unicode.ToUpper(r)
		}
		start = unicode.IsSpace(r)
		b.WriteRune(r)
	}
	return b.String()
}

// upperSnake implements `code` as upper snake case (the spec's
// recommendation): "database down" and "databaseDown" → DATABASE_DOWN.
func upperSnake(s string) string {
	var b strings.Builder
	var prev rune
	pendingSep := false
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			pendingSep = b.Len() > 0
			prev = r
			continue
		}
		if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
			pendingSep = true
		}
		if pendingSep {
			b.WriteByte('_')
			pendingSep = false
		}
		b.WriteRune(unicode.ToUpper(r))
		prev = r
	}
	return b.String()
}

// fTruncate shortens text longer than n runes to at most n runes including
// the trailing "…", cutting at the last word boundary when there is one
// (the docs' limit 30 gave a 25-character result).
func fTruncate(v any, args []string, _ Scope) (any, bool) {
	s, ok := v.(string)
	if !ok || len(args) == 0 {
		return nil, false
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return nil, false
	}
	rs := []rune(s)
	if len(rs) <= n {
		return s, true
	}
	cut := string(rs[:n-1])
	// Only cut at a word boundary if the next rune does not continue a word.
	if !unicode.IsSpace(rs[n-1]) {
		if i := strings.LastIndexFunc(cut, unicode.IsSpace); i > 0 {
			cut = cut[:i]
		}
	}
	return strings.TrimRightFunc(cut, unicode.IsSpace) + "…", true
}

func fPluck(v any, args []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok || len(args) == 0 {
		return nil, false
	}
	out := make([]any, 0, len(l))
	for _, item := range l {
		if _, isList := asList(item); isList || item == nil {
			return nil, false
		}
		x, found := condition.Lookup(item, []string{args[0]})
		if !found {
			if reflect.ValueOf(item).Kind() != reflect.Map {
				return nil, false
			}
			x = nil
		}
		out = append(out, x)
	}
	return out, true
}

func fCount(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	return len(l), true
}

func fLimit(v any, args []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	n, nok := intArg(args, 0, -1)
	if !ok || !nok || n < 0 {
		return nil, false
	}
	if n < len(l) {
		l = l[:n]
	}
	return l, true
}

func fCompact(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	out := make([]any, 0, len(l))
	for _, x := range l {
		if x != nil {
			out = append(out, x)
		}
	}
	return out, true
}

func roundTo(f float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(f*p) / p
}

func fRound(v any, args []string, _ Scope) (any, bool) {
	f, ok := condition.ToFloat(v)
	d, dok := intArg(args, 0, 0)
	if !ok || !dok || d < 0 || d > 15 {
		return nil, false
	}
	return roundTo(f, d), true
}

func fNumberFormat(v any, args []string, _ Scope) (any, bool) {
	f, ok := condition.ToFloat(v)
	d, dok := intArg(args, 0, 0)
	if !ok || !dok || d < 0 || d > 15 || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	s := strconv.FormatFloat(roundTo(f, d), 'f', d, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg && strings.Trim(out, "0.,") != "" {
		out = "-" + out
	}
	return out, true
}

func fPercent(v any, args []string, _ Scope) (any, bool) {
	f, ok := condition.ToFloat(v)
	d, dok := intArg(args, 0, 0)
	if !ok || !dok || d < 0 || d > 15 {
		return nil, false
	}
	return strconv.FormatFloat(roundTo(f*100, d), 'f', d, 64) + "%", true
}

// fReplace replaces every occurrence (the spec's recommendation).
func fReplace(v any, args []string, _ Scope) (any, bool) {
	s, ok := v.(string)
	if !ok || len(args) < 1 || args[0] == "" {
		return nil, false
	}
	return strings.ReplaceAll(s, args[0], arg(args, 1, "")), true
}

func fYesNo(v any, args []string, _ Scope) (any, bool) {
	b, ok := v.(bool)
	if !ok {
		return nil, false
	}
	if b {
		return arg(args, 0, "yes"), true
	}
	return arg(args, 1, "no"), true
}

// fAndJoin joins "a and b", and "a, b and c" for three or more items.
func fAndJoin(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok || len(l) == 0 {
		return nil, false
	}
	t := texts(l)
	if len(t) == 1 {
		return t[0], true
	}
	return strings.Join(t[:len(t)-1], ", ") + " and " + t[len(t)-1], true
}

func fFirst(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok || len(l) == 0 {
		return nil, false
	}
	return l[0], true
}

func fLast(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok || len(l) == 0 {
		return nil, false
	}
	return l[len(l)-1], true
}

func fSum(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	var total float64
	for _, x := range l {
		f, ok := condition.ToFloat(x)
		if !ok {
			return nil, false
		}
		total += f
	}
	return total, true
}

func fFlatten(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	var out []any
	for _, x := range l {
		if inner, ok := asList(x); ok {
			out = append(out, inner...)
		} else {
			out = append(out, x)
		}
	}
	if out == nil {
		out = []any{}
	}
	return out, true
}

func fSplit(v any, args []string, _ Scope) (any, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	parts := strings.Split(s, arg(args, 0, ","))
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, true
}

// fSort sorts all-number or all-text lists ascending; mixed lists fail.
func fSort(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	out := append([]any(nil), l...)
	if out == nil {
		return []any{}, true
	}
	allNum, allText := true, true
	for _, x := range out {
		if _, ok := condition.ToFloat(x); !ok {
			allNum = false
		}
		if _, ok := x.(string); !ok {
			allText = false
		}
	}
	switch {
	case allNum:
		sort.SliceStable(out, func(i, j int) bool {
			a, _ := condition.ToFloat(out[i])
			b, _ := condition.ToFloat(out[j])
			return a < b
		})
	case allText:
		sort.SliceStable(out, func(i, j int) bool { return out[i].(string) < out[j].(string) })
	default:
		return nil, false
	}
	return out, true
}

func fUnique(v any, _ []string, _ Scope) (any, bool) {
	l, ok := asList(v)
	if !ok {
		return nil, false
	}
	seen := map[string]bool{}
	out := make([]any, 0, len(l))
	for _, x := range l {
		key := jsonText(x, false)
		if f, ok := condition.ToFloat(x); ok {
			key = jsonText(f, false) // 5 and 5.0 are the same number
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, x)
	}
	return out, true
}

func fIndent(v any, args []string, _ Scope) (any, bool) {
	s, ok := v.(string)
	n, nok := intArg(args, 0, 2)
	if !ok || !nok || n < 0 || n > 1000 {
		return nil, false
	}
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = pad + lines[i]
	}
	return strings.Join(lines, "\n"), true
}

// parseTime accepts the ISO-8601 forms agents and handlers commonly write.
func parseTime(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

var dateLayouts = map[string]string{
	"short":    "Jan 2, 2006",
	"long":     "January 2, 2006",
	"iso":      "2006-01-02",
	"time":     "15:04",
	"datetime": "Jan 2, 2006, 15:04",
}

func fDate(v any, args []string, _ Scope) (any, bool) {
	s, ok := v.(string)
	if !ok {
		return nil, false
	}
	t, ok := parseTime(strings.TrimSpace(s))
	layout, lok := dateLayouts[arg(args, 0, "short")]
	if !ok || !lok {
		return nil, false
	}
	return t.Format(layout), true
}

// fFromNow prints whole units, largest first: seconds, minutes, hours,
// then days (the docs' example is "246 days ago").
func fFromNow(v any, _ []string, s Scope) (any, bool) {
	str, ok := v.(string)
	if !ok {
		return nil, false
	}
	t, ok := parseTime(strings.TrimSpace(str))
	if !ok {
		return nil, false
	}
	d := s.now().Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var n int64
	var unit string
	switch {
	case d < time.Minute:
		n, unit = int64(d/time.Second), "second"
	case d < time.Hour:
		n, unit = int64(d/time.Minute), "minute"
	case d < 24*time.Hour:
		n, unit = int64(d/time.Hour), "hour"
	default:
		n, unit = int64(d/(24*time.Hour)), "day"
	}
	if n == 0 {
		return "just now", true
	}
	phrase := strconv.FormatInt(n, 10) + " " + unit
	if n != 1 {
		phrase += "s"
	}
	if future {
		return "in " + phrase, true
	}
	return phrase + " ago", true
}

// fDuration prints milliseconds as "1h 2m 3s" (zero parts left out; under a
// second as "<n>ms").
func fDuration(v any, _ []string, _ Scope) (any, bool) {
	f, ok := condition.ToFloat(v)
	if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e15 {
		return nil, false
	}
	ms := int64(f)
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + "ms", true
	}
	secs := ms / 1000
	parts := []struct {
		n    int64
		unit string
	}{{secs / 86400, "d"}, {secs % 86400 / 3600, "h"}, {secs % 3600 / 60, "m"}, {secs % 60, "s"}}
	var out []string
	for _, p := range parts {
		if p.n > 0 {
			out = append(out, strconv.FormatInt(p.n, 10)+p.unit)
		}
	}
	return strings.Join(out, " "), true
}
