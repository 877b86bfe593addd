package command

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/realm-go/realm/mcp-svc/mcpserver"
	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/version"
)

// serveGrace is how long in-flight MCP requests may finish on Ctrl-C.
const serveGrace = 10 * time.Second

func (a *app) serveCommand() *cobra.Command {
	var port int
	var host string
	var dev bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the MCP tools over streamable HTTP (stateless), a client of engine-svc",
		Long: "Serve Realm's 11 MCP tools over HTTP. Every request carries Authorization: Bearer $" + mcpserver.TokenEnv + ";\n" +
			"without a token it refuses to start unless --dev or " + mcpserver.DevEnv + "=1 turns the check off.\n" +
			"Stateless: no MCP session is kept between requests. Every path reaches the server.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dev = mcpserver.DevMode(dev, a.env.Getenv)
			token, err := mcpserver.Token(dev, a.env.Getenv)
			if err != nil {
				return &exitError{code: ExitRefused, msg: err.Error()}
			}
			srv, closeConn, err := a.mcpServer(realmv1.Channel_CHANNEL_MCP_HTTP, "realm serve: ")
			if err != nil {
				return err
			}
			defer closeConn()
			addr := net.JoinHostPort(host, strconv.Itoa(port))
			lis, err := mcpserver.Listen(addr)
			if err != nil {
				return refuse("Error: %v", err)
			}
			if dev {
				fmt.Fprintln(a.env.Stdout, mcpserver.DevWarning)
			}
			fmt.Fprintf(a.env.Stdout, "Realm MCP server listening on http://%s/\n", lis.Addr())
			if !dev {
				fmt.Fprintln(a.env.Stdout, mcpserver.AuthLine)
			}
			h := srv.HTTPHandler(mcpserver.HTTPOptions{Token: token, ErrorLog: a.env.Stderr, LogPrefix: "realm serve: "})
			if err := mcpserver.Serve(cmd.Context(), lis, h, serveGrace); err != nil {
				return refuse("realm serve: %v", err)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&port, "port", 3001, "port")
	cmd.Flags().StringVar(&host, "host", "127.0.0.1", "bind address (loopback only by default)")
	cmd.Flags().BoolVar(&dev, "dev", false, "disable the token check (local development only)")
	return cmd
}

// mcpServer builds the MCP server over a lazily dialled engine connection:
// the server starts even while engine-svc is down, and each tool call then
// says it cannot reach it. The returned close func is never nil.
func (a *app) mcpServer(ch realmv1.Channel, logPrefix string) (*mcpserver.Server, func(), error) {
	caller, err := mcpserver.AmbientCaller(a.env.Getenv, ch)
	if err != nil {
		return nil, func() {}, refuse("%s%v", logPrefix, err)
	}
	addr := a.engineAddr()
	transport, err := a.transport(addr, mtls.RoleEngine)
	if err != nil {
		return nil, func() {}, err
	}
	conn, err := client.NewConn(addr, transport)
	if err != nil {
		return nil, func() {}, &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: cannot reach engine-svc at %s: %v", addr, err)}
	}
	srv := mcpserver.New(mcpserver.Options{
		Engine:     realmv1.NewEngineServiceClient(conn),
		EngineAddr: addr,
		Caller:     caller,
		Version:    version.Version,
		ErrorLog:   a.env.Stderr,
		LogPrefix:  logPrefix,
	})
	return srv, func() { _ = conn.Close() }, nil
}
