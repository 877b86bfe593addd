// Package notes is the MCP server of examples/invoice-notes.yaml: a small
// read-only notebook (list_notes, read_note) that an agent step calls
// through the MCP go-sdk while it works out its answer.
package notes

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Book is the notebook: note name → text.
var Book = map[string]string{
	"invoice-1042": "Invoice 1042 for ACME Ltd: 3 licences at 40 EUR, total 120 EUR, due 2026-12-31.",
	"invoice-1043": "Invoice 1043 for Globex: 1 support plan, total 900 EUR, paid.",
	"acme":         "ACME Ltd pays by bank transfer; contact billing@acme.example.",
}

// ReadArgs names a note.
type ReadArgs struct {
	Name string `json:"name" jsonschema:"the note's name, as list_notes gives it"`
}

// ListArgs filters the list.
type ListArgs struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"only names starting with this"`
}

// Server is the notes server of book.
func Server(book map[string]string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "list_notes", Description: "List the names of the notes."},
		func(_ context.Context, _ *mcp.CallToolRequest, a ListArgs) (*mcp.CallToolResult, any, error) {
			var names []string
			for n := range book {
				if strings.HasPrefix(n, a.Prefix) {
					names = append(names, n)
				}
			}
			sort.Strings(names)
			return text(strings.Join(names, "\n")), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "read_note", Description: "Read one note by name."},
		func(_ context.Context, _ *mcp.CallToolRequest, a ReadArgs) (*mcp.CallToolResult, any, error) {
			t, ok := book[a.Name]
			if !ok {
				return nil, nil, fmt.Errorf("no note named '%s'", a.Name)
			}
			return text(t), nil, nil
		})
	return s
}

func text(t string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
}
