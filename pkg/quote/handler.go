package quote

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/realm-go/realm/pkg/errcode"
)

// HandlerName is the name steps use for the built-in quote check.
const HandlerName = "check_quotes"

var configKeys = []string{"source_step", "source_field", "candidates_step", "candidates_field", "quote_field", "min_part_chars"}

type config struct {
	sourceStep, sourceField         string
	candidatesStep, candidatesField string
	quoteField                      string
	minPart                         int
}

// readConfig reads the step's config, naming every fault at once.
func readConfig(raw map[string]any) (config, []string) {
	c := config{sourceField: "text", candidatesField: "candidates", quoteField: "quote", minPart: DefaultMinPartChars}
	var faults []string
	var unknown []string
	for k := range raw {
		known := false
		for _, ck := range configKeys {
			known = known || k == ck
		}
		if !known {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		faults = append(faults, fmt.Sprintf("unknown key '%s' (remove it; the keys are %s)", k, strings.Join(configKeys, ", ")))
	}
	str := func(key string, dst *string, required bool, what string) {
		v, ok := raw[key]
		if !ok || v == nil {
			if required {
				faults = append(faults, fmt.Sprintf("'%s' is missing (set it to %s)", key, what))
			}
			return
		}
		s, isStr := v.(string)
		if !isStr || s == "" {
			faults = append(faults, fmt.Sprintf("'%s' must be a non-empty string (set it to %s)", key, what))
			return
		}
		*dst = s
	}
	str("source_step", &c.sourceStep, true, "the step whose output holds the document")
	str("source_field", &c.sourceField, false, "the field that holds the document's text")
	str("candidates_step", &c.candidatesStep, true, "the step whose output holds the extracted values")
	str("candidates_field", &c.candidatesField, false, "the field that holds the list of values")
	str("quote_field", &c.quoteField, false, "the field of each value that holds its quote")
	if v, ok := raw["min_part_chars"]; ok {
		n, isNum := toInt(v)
		if !isNum || n < MinMinPartChars {
			faults = append(faults, fmt.Sprintf("'min_part_chars' must be a whole number of at least %d (it is %s)", MinMinPartChars, describe(v)))
		} else {
			c.minPart = n
		}
	}
	return c, faults
}

func toInt(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) || n > 1e9 || n < -1e9 {
			return 0, false
		}
		return int(n), true
	case int:
		return n, true
	case int64:
		return int(n), true
	}
	return 0, false
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

func fail(faults []string) error {
	msg := "check_quotes: " + strings.Join(faults, "; ")
	if len(faults) > 1 {
		msg = fmt.Sprintf("check_quotes: %d problems: %s", len(faults), strings.Join(faults, "; "))
	}
	return errcode.New(errcode.EngineHandlerFailed, msg)
}

// CheckQuotes is the built-in check_quotes handler. resources maps each step
// that has run to its recorded output; both steps are read from there by id.
// A fault in the config or the resources fails with ENGINE_HANDLER_FAILED; a
// quote that is not found only adds to the warning.
func CheckQuotes(cfg map[string]any, resources map[string]any) (map[string]any, string, error) {
	c, faults := readConfig(cfg)
	if len(faults) > 0 {
		return nil, "", fail(faults)
	}
	source, ok := field(resources, c.sourceStep, c.sourceField)
	switch {
	case !ok:
		if _, has := resources[c.sourceStep]; !has {
			faults = append(faults, fmt.Sprintf("step '%s' has no output yet (list it in this step's depends_on)", c.sourceStep))
		} else {
			faults = append(faults, fmt.Sprintf("'%s.%s' is missing (set source_field to the field that holds the document's text)", c.sourceStep, c.sourceField))
		}
	default:
		if _, isStr := source.(string); !isStr {
			faults = append(faults, fmt.Sprintf("'%s.%s' is not text (it is %s; set source_field to the field that holds the document's text)", c.sourceStep, c.sourceField, kind(source)))
		}
	}
	cands, ok := field(resources, c.candidatesStep, c.candidatesField)
	var values []map[string]any
	switch {
	case !ok:
		if _, has := resources[c.candidatesStep]; !has {
			faults = append(faults, fmt.Sprintf("step '%s' has no output yet (list it in this step's depends_on)", c.candidatesStep))
		} else {
			faults = append(faults, fmt.Sprintf("'%s.%s' is missing (set candidates_field to the field that holds the list of values)", c.candidatesStep, c.candidatesField))
		}
	default:
		list, isList := cands.([]any)
		if !isList {
			faults = append(faults, fmt.Sprintf("'%s.%s' is not a list of objects (it is %s)", c.candidatesStep, c.candidatesField, kind(cands)))
			break
		}
		for i, v := range list {
			m, isObj := v.(map[string]any)
			if !isObj {
				faults = append(faults, fmt.Sprintf("'%s.%s' is not a list of objects (item %d is %s)", c.candidatesStep, c.candidatesField, i, kind(v)))
				values = nil
				break
			}
			values = append(values, m)
		}
	}
	if len(faults) > 0 {
		return nil, "", fail(faults)
	}
	text := source.(string)
	byState := map[string]any{}
	counts := map[State]int{}
	results := make([]any, 0, len(values))
	var missing []string
	for i, v := range values {
		res, note := checkValue(v, c, text)
		counts[res.State]++
		out := make(map[string]any, len(v)+1)
		for k, x := range v {
			out[k] = x
		}
		out["quote_check"] = res.Map()
		results = append(results, out)
		if res.State == NotFound {
			missing = append(missing, fieldName(v, i)+" — "+note)
		}
	}
	for _, s := range []State{Exact, Reformatted, Stitched, StitchedOutOfOrder, NotFound, Unquoted} {
		byState[string(s)] = float64(counts[s])
	}
	output := map[string]any{
		"results":          results,
		"by_state":         byState,
		"all_found":        counts[NotFound] == 0,
		"candidates_found": float64(len(values)),
	}
	return output, warning(missing, len(values), c), nil
}

// checkValue locates one value's quote; note is its line in the warning.
func checkValue(v map[string]any, c config, source string) (Result, string) {
	nf := Result{State: NotFound, Parts: []Span{}}
	q, hasQuote := v[c.quoteField]
	if !hasQuote || q == nil {
		if val, hasVal := v["value"]; hasVal && (val == nil || val == "") {
			return Result{State: Unquoted, Parts: []Span{}}, ""
		}
		return nf, "no quote given"
	}
	qs, isStr := q.(string)
	if !isStr {
		return nf, "the quote is not text"
	}
	res := LocateQuote(qs, source, Options{MinPartChars: c.minPart})
	if res.State != NotFound {
		return res, ""
	}
	note := `"` + printable(qs) + `" `
	if res.Nearest != nil {
		note += fmt.Sprintf("(nearest match at %d–%d)", res.Nearest.Start, res.Nearest.End)
	} else {
		note += "(no nearby match)"
	}
	return res, note
}

func fieldName(v map[string]any, i int) string {
	if f, ok := v["field"].(string); ok && f != "" {
		return printable(f)
	}
	return fmt.Sprintf("value %d", i+1)
}

// warning names each value not found: ten at most, then "and N more".
func warning(missing []string, total int, c config) string {
	if len(missing) == 0 {
		return ""
	}
	shown := missing
	if len(shown) > 10 {
		shown = shown[:10]
	}
	msg := fmt.Sprintf("Quote check: %d of %d values not found in '%s.%s': %s", len(missing), total, c.sourceStep, c.sourceField, strings.Join(shown, "; "))
	if extra := len(missing) - len(shown); extra > 0 {
		msg += fmt.Sprintf("; and %d more", extra)
	}
	return msg + "."
}

// printable puts a quote on one line: control characters written out, cut
// after its 80th character with "…" (a mark after the 80th is cut too).
func printable(s string) string {
	var b strings.Builder
	n := 0
	cut := false
	for _, r := range s {
		if n == 80 {
			cut = true // the rest, marks on the 80th character included, is cut
			break
		}
		n++
		if unicode.IsControl(r) {
			fmt.Fprintf(&b, `\u%04x`, r)
			continue
		}
		b.WriteRune(r)
	}
	if cut {
		b.WriteString("…")
	}
	return b.String()
}

func field(resources map[string]any, step, name string) (any, bool) {
	out, ok := resources[step].(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := out[name]
	return v, ok
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "text"
	case bool:
		return "a boolean"
	case float64, int, int64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
