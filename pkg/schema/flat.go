package schema

import "math"

// flat is a schema of the shape most step schemas have: an object whose
// named properties each have one primitive type, some of them required,
// perhaps no others allowed. Such a schema is decided here without the
// validator, which allocates two dozen times per value it checks (its
// scopes, and a big.Rat per number). Only "valid" is decided: a value
// this check refuses goes to the validator, whose errors are the
// product's, so a flat schema can only be slower than it should be, never
// say something else. FuzzCompile holds the two to the same verdict.
type flat struct {
	required []string
	props    map[string]primitive
	closed   bool // additionalProperties: false
}

type primitive uint8

const (
	primString primitive = iota + 1
	primInteger
	primNumber
	primBoolean
)

// annotations are keywords that never change a verdict.
var annotations = set("description", "title", "$comment", "examples")

// flatOf is doc as a flat schema, or nil when it uses anything else.
func flatOf(doc any) *flat {
	m, ok := doc.(map[string]any)
	if !ok || m["type"] != "object" {
		return nil
	}
	f := &flat{props: map[string]primitive{}}
	for k, v := range m {
		switch {
		case k == "type" || annotations[k]:
		case k == "required":
			list, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, r := range list {
				s, ok := r.(string)
				if !ok {
					return nil
				}
				f.required = append(f.required, s)
			}
		case k == "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			f.closed = !b
		case k == "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			for name, sub := range props {
				p := primitiveOf(sub)
				if p == 0 {
					return nil
				}
				f.props[name] = p
			}
		default:
			return nil
		}
	}
	return f
}

// primitiveOf is a property schema's one type, or 0 when it says more.
func primitiveOf(doc any) primitive {
	m, ok := doc.(map[string]any)
	if !ok {
		return 0
	}
	var p primitive
	for k, v := range m {
		switch {
		case annotations[k]:
		case k == "type":
			switch v {
			case "string":
				p = primString
			case "integer":
				p = primInteger
			case "number":
				p = primNumber
			case "boolean":
				p = primBoolean
			default:
				return 0
			}
		default:
			return 0
		}
	}
	return p
}

// valid reports whether inst (plain decoded JSON) is certainly valid.
func (f *flat) valid(inst any) bool {
	obj, ok := inst.(map[string]any)
	if !ok {
		return false
	}
	for _, r := range f.required {
		if _, ok := obj[r]; !ok {
			return false
		}
	}
	for k, v := range obj {
		p, ok := f.props[k]
		if !ok {
			if f.closed {
				return false
			}
			continue
		}
		if !p.holds(v) {
			return false
		}
	}
	return true
}

func (p primitive) holds(v any) bool {
	switch p {
	case primString:
		_, ok := v.(string)
		return ok
	case primBoolean:
		_, ok := v.(bool)
		return ok
	case primNumber:
		x, ok := v.(float64)
		return ok && !math.IsNaN(x) && !math.IsInf(x, 0)
	case primInteger:
		x, ok := v.(float64)
		return ok && !math.IsInf(x, 0) && x == math.Trunc(x)
	}
	return false
}
