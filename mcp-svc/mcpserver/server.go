// Package mcpserver is Realm's MCP server: the 11 tools of seed "MCP
// tools", each translated into one engine-svc gRPC call, served over
// streamable HTTP (stateless) or stdio.
//
// It is a thin front door: the engine composes every reply; this package
// checks arguments the way the original's MCP layer did, maps protobuf to
// the seed's JSON with pkg/reply, and turns a failed call into an MCP tool
// error. It keeps nothing between calls.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/mcp-svc/internal/sdkworkaround"
	"github.com/realm-go/realm/pkg/client"
	"github.com/realm-go/realm/pkg/errcode"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/reply"
)

// Options configure a Server.
type Options struct {
	// Engine is the engine-svc client every tool call goes through.
	Engine realmv1.EngineServiceClient
	// EngineAddr is the engine's address, for "cannot reach" messages.
	EngineAddr string
	// Caller names this program on every request that records one
	// (see AmbientCaller).
	Caller *realmv1.Caller
	// Version is reported in initialize's serverInfo.
	Version string
	// ErrorLog receives the server's own failure lines (never per request
	// for a good call); nil means os.Stderr.
	ErrorLog io.Writer
	// LogPrefix starts each line written to ErrorLog, e.g. "realm serve: ".
	LogPrefix string
	// Metrics, when set, receives per-tool call counts and latencies.
	Metrics prometheus.Registerer
}

// Server is the MCP server over one engine client. It is safe for
// concurrent use and keeps no state between calls.
type Server struct {
	engine realmv1.EngineServiceClient
	addr   string
	caller *realmv1.Caller
	mcp    *mcp.Server
	log    io.Writer
	prefix string
	byName map[string]*tool
	slog   *slog.Logger
	m      *toolMetrics
}

// New builds the server and registers the 11 tools.
func New(o Options) *Server {
	s := &Server{
		engine: o.Engine,
		addr:   o.EngineAddr,
		caller: o.Caller,
		log:    o.ErrorLog,
		prefix: o.LogPrefix,
		byName: make(map[string]*tool, len(tools)),
		m:      newToolMetrics(o.Metrics),
	}
	if s.log == nil {
		s.log = os.Stderr
	}
	version := o.Version
	if version == "" {
		version = "0.0.0-dev"
	}
	s.slog = slog.New(&lineHandler{w: s.log, prefix: s.prefix})
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "realm", Version: version}, &mcp.ServerOptions{Logger: s.slog})
	// The SDK re-reads a registered schema on every call: each is encoded
	// once, and only tools/list sees it whole (sdkworkaround).
	listed := sdkworkaround.NewListedSchemas()
	for _, t := range tools {
		s.byName[t.name] = t
		listed.AddTool(s.mcp, &mcp.Tool{Name: t.name, Description: t.desc}, sdkworkaround.RawSchema(inputSchema(t.params)), s.handler(t))
	}
	s.mcp.AddReceivingMiddleware(listed.Middleware())
	return s
}

// MCP is the underlying go-sdk server (for transports).
func (s *Server) MCP() *mcp.Server { return s.mcp }

// ServeStdio serves the tools as newline-delimited JSON-RPC over in and out
// (stdin and stdout for `realm mcp`) until in closes or ctx ends. Nothing
// else may be written to out meanwhile. out is not closed.
func (s *Server) ServeStdio(ctx context.Context, in io.ReadCloser, out io.Writer) error {
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}})
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// ToolNames lists the tools in the seed's order.
func ToolNames() []string {
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		names = append(names, t.name)
	}
	return names
}

// Call runs one tool on raw JSON arguments, as a tools/call would, without
// a transport. An unknown tool is an error; every other outcome is a result.
func (s *Server) Call(ctx context.Context, name string, arguments []byte) (*mcp.CallToolResult, error) {
	t, ok := s.byName[name]
	if !ok {
		return nil, fmt.Errorf("unknown tool %q", name)
	}
	return s.run(ctx, t, arguments), nil
}

func (s *Server) handler(t *tool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var raw []byte
		if req != nil && req.Params != nil {
			raw = req.Params.Arguments
		}
		return s.run(ctx, t, raw), nil
	}
}

// run decodes, calls the engine once, and renders. A panic below is logged
// and answered as a tool error, never a crash.
func (s *Server) run(ctx context.Context, t *tool, raw []byte) (res *mcp.CallToolResult) {
	began := time.Now()
	var out any
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(s.log, "%s%s: %v\n", s.prefix, t.name, p)
			res = toolError("Error: internal error in " + t.name + ".")
		}
		s.m.observe(t.name, out, res == nil || res.IsError, time.Since(began))
	}()
	a, err := decodeArgs(t.name, t.params, raw)
	if err != nil {
		return toolError(err.Error())
	}
	out, err = t.call(ctx, s, a)
	if err != nil {
		return toolError(s.errorText(t.name, err))
	}
	return jsonResult(out)
}

// errEmptyReply is an engine answer with nothing in it.
var errEmptyReply = errors.New("engine-svc sent an empty reply")

func nonNil(m map[string]any) (any, error) {
	if m == nil {
		return nil, errEmptyReply
	}
	return m, nil
}

// listRefusal renders a failed ListWorkflows as list_workflows' own
// refusal when the engine named a catalogue code.
func listRefusal(err error) (any, error) {
	e, ok := errcode.FromStatus(err)
	if !ok {
		return nil, err
	}
	return reply.ListWorkflowsRefusalJSON(string(e.Code), e.Error(), e.Details, string(e.Action())), nil
}

// errorText is the text of the tool error for a failed call. A catalogue
// error gives the engine's message (get_workflow_protocol's unknown ID reads
// "Error: Workflow not found: <id>"); the gRPC code is read only for
// failures that carry none.
func (s *Server) errorText(tool string, err error) string {
	if e, ok := errcode.FromStatus(err); ok {
		return "Error: " + oneLine(e.Error())
	}
	if _, isStatus := status.FromError(err); !isStatus {
		return "Error: " + oneLine(err.Error())
	}
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Sprintf("Error: %s is not available: engine-svc does not implement it yet (gRPC Unimplemented).", tool)
	case codes.Unavailable:
		return fmt.Sprintf("Error: cannot reach engine-svc at %s: %s", s.addr, client.Cause(err))
	case codes.DeadlineExceeded:
		return fmt.Sprintf("Error: engine-svc at %s did not answer in time.", s.addr)
	case codes.Canceled:
		return "Error: the call was cancelled."
	}
	return "Error: " + client.Cause(err)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// jsonResult is a reply as one text content item holding the JSON object
// (spec mcp-and-gates §2: the natural encoding). HTML characters stay as
// they are: placeholders such as "<billing|bug|other>" are read by models.
func jsonResult(v any) *mcp.CallToolResult {
	text, err := encodeReply(v)
	if err != nil {
		return toolError("Error: the reply could not be encoded: " + err.Error())
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// lineHandler writes the SDK's error records as one prefixed line each;
// lower levels are dropped (nothing is printed per request).
type lineHandler struct {
	w      io.Writer
	prefix string
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (h *lineHandler) Handle(_ context.Context, r slog.Record) error {
	_, err := fmt.Fprintf(h.w, "%s%s\n", h.prefix, oneLine(r.Message))
	return err
}

func (h *lineHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *lineHandler) WithGroup(string) slog.Handler      { return h }
