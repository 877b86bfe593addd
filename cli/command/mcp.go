package command

import (
	"io"

	"github.com/spf13/cobra"

	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
)

func (a *app) mcpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the MCP tools over stdio (JSON-RPC on stdin/stdout), a client of engine-svc",
		Long: "Serve Realm's 11 MCP tools over stdio until stdin closes. Nothing else is written to\n" +
			"stdout; diagnostics go to stderr. Client configuration:\n" +
			`  {"mcpServers": {"realm": {"command": "realm", "args": ["mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv, closeConn, err := a.mcpServer(realmv1.Channel_CHANNEL_MCP_STDIO, "realm mcp: ")
			if err != nil {
				return err
			}
			defer closeConn()
			if err := srv.ServeStdio(cmd.Context(), io.NopCloser(a.env.Stdin), a.env.Stdout); err != nil {
				return refuse("realm mcp: %v", err)
			}
			return nil
		},
	}
}
