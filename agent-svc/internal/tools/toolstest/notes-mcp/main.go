// Command notes-mcp serves the toolstest notes server over stdio; the
// tests of tool-calling steps build and start it.
package main

import (
	"context"
	"log"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/realm-go/realm/agent-svc/internal/tools/toolstest"
)

func main() {
	if err := toolstest.Notes().Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		log.Fatal(err)
	}
}
