package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Results holds each benchmark's samples, by name without the "Benchmark"
// prefix, the #NN go test gives a repeated name and the -GOMAXPROCS
// suffix, in the order they were printed: the
// i-th sample of every benchmark belongs to the i-th repeat.
type Results map[string][]Sample

// Sample is one result line's figures by unit ("ns/op", "allocs/op",
// "transitions/s", ...), the iteration count under "N".
type Sample map[string]float64

var resultLine = regexp.MustCompile(`^Benchmark(\S+?)(?:#\d+)?(?:-\d+)?\s+(\d+)\s+(.+)$`)

// ParseLine reads one line of `go test -bench` output; ok is false for
// any other line.
func ParseLine(line string) (name string, s Sample, ok bool) {
	m := resultLine.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", nil, false
	}
	n, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return "", nil, false
	}
	s = Sample{"N": n}
	f := strings.Fields(m[3])
	if len(f)%2 != 0 {
		return "", nil, false
	}
	for i := 0; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		s[f[i+1]] = v
	}
	return m[1], s, true
}

// Add records a sample of name.
func (r Results) Add(name string, s Sample) { r[name] = append(r[name], s) }

// Parse reads every result line of a benchmark output.
func Parse(in io.Reader) (Results, error) {
	r := Results{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if name, s, ok := ParseLine(sc.Text()); ok {
			r.Add(name, s)
		}
	}
	return r, sc.Err()
}
