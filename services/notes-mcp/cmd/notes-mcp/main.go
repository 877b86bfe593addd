// Command notes-mcp serves the example notes over MCP stdio for
// examples/invoice-notes.yaml (agent-svc starts it when a step needs it).
//
//	notes-mcp [--notes-file notes.json]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/services/notes-mcp/notes"
)

func main() {
	file := flag.String("notes-file", "", "a JSON `file` of {name: text} served instead of the built-in notes")
	flag.Parse()
	book := notes.Book
	if *file != "" {
		b, err := os.ReadFile(*file)
		if err != nil {
			log.Fatal(err)
		}
		book = map[string]string{}
		if err := json.Unmarshal(b, &book); err != nil {
			log.Fatalf("%s: %v", *file, err)
		}
	}
	if err := notes.Server(book).Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
