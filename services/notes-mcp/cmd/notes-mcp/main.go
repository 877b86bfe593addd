// Command notes-mcp serves the example notes over MCP stdio for
// examples/invoice-notes.yaml (agent-svc starts it when a step needs it).
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/services/notes-mcp/notes"
)

func main() {
	if err := notes.Server().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
