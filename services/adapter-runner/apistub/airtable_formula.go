package apistub

import (
	"errors"
	"fmt"
	"strings"
)

// airtableFormula reads the filterByFormula forms the stub evaluates —
// FIND("needle", {field}), OR(a, b, …) and {field} = 'value' — into a
// predicate on a record's fields. Strings are in double quotes with \" and
// \\ escapes, or in single quotes.
func airtableFormula(s string) (func(map[string]any) bool, error) {
	p := &airtableParser{s: s}
	f, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.skip(); p.i != len(p.s) {
		return nil, fmt.Errorf("unexpected %q at %d", p.s[p.i:], p.i)
	}
	return f, nil
}

type airtableParser struct {
	s string
	i int
}

func (p *airtableParser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

// eat consumes tok (after spaces) and reports whether it was there.
func (p *airtableParser) eat(tok string) bool {
	p.skip()
	if strings.HasPrefix(p.s[p.i:], tok) {
		p.i += len(tok)
		return true
	}
	return false
}

func (p *airtableParser) expect(tok string) error {
	if !p.eat(tok) {
		return fmt.Errorf("expected %q at %d", tok, p.i)
	}
	return nil
}

func (p *airtableParser) expr() (func(map[string]any) bool, error) {
	switch {
	case p.eat("OR("):
		var terms []func(map[string]any) bool
		for {
			t, err := p.expr()
			if err != nil {
				return nil, err
			}
			terms = append(terms, t)
			if p.eat(")") {
				break
			}
			if err := p.expect(","); err != nil {
				return nil, err
			}
		}
		return func(f map[string]any) bool {
			for _, t := range terms {
				if t(f) {
					return true
				}
			}
			return false
		}, nil
	case p.eat("FIND("):
		needle, err := p.str()
		if err != nil {
			return nil, err
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
		field, err := p.field()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		return func(f map[string]any) bool { return f[field] != nil && strings.Contains(fmt.Sprint(f[field]), needle) }, nil
	}
	field, err := p.field()
	if err != nil {
		return nil, err
	}
	if err := p.expect("="); err != nil {
		return nil, err
	}
	value, err := p.str()
	if err != nil {
		return nil, err
	}
	return func(f map[string]any) bool { return fmt.Sprint(f[field]) == value }, nil
}

func (p *airtableParser) field() (string, error) {
	if err := p.expect("{"); err != nil {
		return "", err
	}
	end := strings.IndexByte(p.s[p.i:], '}')
	if end < 0 {
		return "", errors.New("unclosed field reference")
	}
	name := p.s[p.i : p.i+end]
	p.i += end + 1
	return name, nil
}

func (p *airtableParser) str() (string, error) {
	p.skip()
	if p.i >= len(p.s) || (p.s[p.i] != '"' && p.s[p.i] != '\'') {
		return "", fmt.Errorf("expected a string at %d", p.i)
	}
	quote := p.s[p.i]
	var b strings.Builder
	for p.i++; p.i < len(p.s); p.i++ {
		c := p.s[p.i]
		switch {
		case c == '\\' && p.i+1 < len(p.s):
			p.i++
			b.WriteByte(p.s[p.i])
		case c == quote:
			p.i++
			return b.String(), nil
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unclosed string")
}
