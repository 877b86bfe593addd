package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/realm-go/realm/pkg/client"
	realmv1 "github.com/realm-go/realm/pkg/gen/realm/v1"
	"github.com/realm-go/realm/pkg/mtls"
	"github.com/realm-go/realm/pkg/source"
)

// Where agent-svc listens unless told otherwise.
const (
	DefaultAgentAddr = "127.0.0.1:7071"
	AgentAddrEnv     = "REALM_AGENT_ADDR"
)

// agentFlags are `realm agent`'s flags.
type agentFlags struct {
	workflow, params, runID      string
	provider, model, baseURL     string
	strictBaseURL                bool
	schemaRetries, llmTimeout    int
	promptCache, mintWriterNonce bool
	agentAddr                    string
	detach, register             bool
}

func (a *app) agentCommand() *cobra.Command {
	f := &agentFlags{}
	cmd := &cobra.Command{
		Use:   "agent (--workflow <id|file> [--params JSON] | --run-id <id>) --provider anthropic|openai --model <model>",
		Short: "Drive a run to its end, asking a model for each agent step (through agent-svc)",
		Long: "Start a run of a workflow (a registered id, or a file), or attach to one with --run-id, and\n" +
			"drive it: agent-svc asks the model for every agent step and the engine runs the rest.\n\n" +
			"A file is checked as register checks it but NOT registered: the run carries the file's definition\n" +
			"(stored with the run, so every engine replica, a later --run-id and realm run respond/advance\n" +
			"decide its steps by it), and the registered copy of its id, if any, is neither read nor changed.\n" +
			"With --register the file is registered first, replacing the stored copy of its id as realm\n" +
			"workflow register does, and the run follows the registered copy.\n\n" +
			"Prints the drive as it goes. Exit 0 only when the run completed; 1 otherwise;\n" +
			"2 when agent-svc cannot be reached. With --detach it returns (exit 0) once the run is known,\n" +
			"and agent-svc goes on driving it.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := a.agentRequest(cmd, f)
			if err != nil {
				return err
			}
			return a.drive(cmd.Context(), f, req)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workflow, "workflow", "", "workflow id, or a workflow file or folder (run without registering it unless --register)")
	fl.BoolVar(&f.register, "register", false, "register the --workflow file first, replacing the stored copy of its id; without it the run carries the file's definition")
	fl.StringVar(&f.params, "params", "", "the new run's parameters (JSON object)")
	fl.StringVar(&f.runID, "run-id", "", "continue this run")
	fl.StringVar(&f.provider, "provider", "", "openai or anthropic (default: from the keys agent-svc holds)")
	fl.StringVar(&f.model, "model", "", "model name as the provider knows it (required)")
	fl.StringVar(&f.baseURL, "base-url", "", "OpenAI-compatible service address (OpenAI only; agent-svc must allow it: its --allow-base-url)")
	fl.BoolVar(&f.strictBaseURL, "strict-base-url", false, "the --base-url service enforces strict structured output")
	fl.IntVar(&f.schemaRetries, "schema-retries", 2, "extra asks after the answer fails the step's schema")
	fl.IntVar(&f.llmTimeout, "llm-timeout", 0, "seconds one model request attempt may take (default 600)")
	fl.BoolVar(&f.promptCache, "prompt-cache", false, "ask the provider to cache each step's stable prompt prefix")
	fl.BoolVar(&f.mintWriterNonce, "mint-writer-nonce", false, "give every attempt a fresh writer nonce")
	fl.StringVar(&f.agentAddr, "agent-addr", "", "agent-svc address (default $"+AgentAddrEnv+" or "+DefaultAgentAddr+")")
	fl.BoolVar(&f.detach, "detach", false, "hand the drive to agent-svc and return once its run is known; agent-svc drives it to its end (with Redis, on any replica)")
	return cmd
}

// agentRequest checks the flags and builds the DriveRun request.
func (a *app) agentRequest(cmd *cobra.Command, f *agentFlags) (*realmv1.DriveRunRequest, error) {
	switch {
	case f.workflow == "" && f.runID == "":
		return nil, refuse("Error: one of --workflow or --run-id is required")
	case f.workflow != "" && f.runID != "":
		return nil, refuse("Error: --workflow and --run-id are mutually exclusive")
	case f.runID != "" && cmd.Flags().Changed("params"):
		return nil, refuse("Error: --params cannot be used with --run-id; the run already has params from creation time")
	case f.schemaRetries < 0:
		return nil, refuse("error: option '--schema-retries <n>' argument '%d' is invalid. --schema-retries must be a non-negative integer.", f.schemaRetries)
	case f.register && f.runID != "":
		return nil, refuse("Error: --register cannot be used with --run-id; a run's definition is chosen when it is created")
	case cmd.Flags().Changed("llm-timeout") && f.llmTimeout <= 0:
		return nil, refuse("error: option '--llm-timeout <seconds>' argument '%d' is invalid. --llm-timeout must be a positive integer number of seconds.", f.llmTimeout)
	}
	caller, err := a.caller()
	if err != nil {
		return nil, err
	}
	retries := int32(f.schemaRetries)
	req := &realmv1.DriveRunRequest{RunId: f.runID, Caller: caller, Options: &realmv1.DriveOptions{
		Provider: f.provider, Model: f.model, BaseUrl: f.baseURL, StrictBaseUrl: f.strictBaseURL,
		SchemaRetries: &retries, LlmTimeoutSeconds: int32(f.llmTimeout),
		PromptCache: f.promptCache, MintWriterNonce: f.mintWriterNonce,
	}, Detach: f.detach, Register: f.register}
	if f.workflow != "" {
		if cmd.Flags().Changed("params") {
			p, err := parseParams(f.params)
			if err != nil {
				return nil, err
			}
			req.Params = p
		}
		if looksLikeFile(f.workflow) {
			src, err := source.Read(f.workflow)
			if err != nil {
				return nil, refuse("Error: %s", err.Error())
			}
			req.WorkflowSource = src
		} else if f.register {
			return nil, refuse("Error: --register registers a workflow file, and '%s' names no file: a workflow id is registered already (realm workflow register <path> registers a file)", f.workflow)
		} else {
			req.WorkflowId = f.workflow
		}
	}
	return req, nil
}

// looksLikeFile says --workflow names a file or folder rather than an id:
// something is there, or it has a YAML extension or a path separator.
func looksLikeFile(w string) bool {
	if _, err := os.Stat(w); err == nil {
		return true
	}
	return strings.HasSuffix(w, ".yaml") || strings.HasSuffix(w, ".yml") || strings.ContainsRune(w, os.PathSeparator)
}

func (a *app) agentAddr(f *agentFlags) string {
	if f.agentAddr != "" {
		return f.agentAddr
	}
	if v := strings.TrimSpace(a.env.Getenv(AgentAddrEnv)); v != "" {
		return v
	}
	return DefaultAgentAddr
}

// drive calls agent-svc and prints the drive's lines as they come. The
// exit code is the one the drive's last event gives.
func (a *app) drive(ctx context.Context, f *agentFlags, req *realmv1.DriveRunRequest) error {
	addr := a.agentAddr(f)
	transport, err := a.transport(addr, mtls.RoleFrontDoor)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, err := client.Dial(dctx, addr, transport)
	cancel()
	if err != nil {
		return &exitError{code: ExitUnreachable, msg: "Error: " + strings.Replace(oneLine(err.Error()), "engine-svc", "agent-svc", 1)}
	}
	defer conn.Close()
	// No deadline: a drive lasts as long as its run (gates wait for people).
	stream, err := realmv1.NewAgentServiceClient(conn).DriveRun(ctx, req)
	if err != nil {
		return a.agentRPCError(addr, err)
	}
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return &exitError{code: ExitRefused, msg: "Error: agent-svc ended the drive without saying how it ended."}
		}
		if err != nil {
			return a.agentRPCError(addr, err)
		}
		ev := resp.GetEvent()
		a.printDriveLines(ev.GetLines())
		if f.detach && ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_STARTED {
			// The drive is agent-svc's now: leaving stops only the printing.
			fmt.Fprintf(a.env.Stdout, "Detached: agent-svc drives run %s to its end. Follow it: realm run state %s\n", ev.GetRunId(), ev.GetRunId())
			return nil
		}
		if ev.GetKind() == realmv1.DriveEventKind_DRIVE_EVENT_KIND_FINISHED {
			if ev.GetExitCode() == 0 && ev.GetOutcome() == realmv1.DriveOutcome_DRIVE_OUTCOME_COMPLETED {
				return nil
			}
			return &exitError{code: ExitRefused}
		}
	}
}

func (a *app) printDriveLines(lines []*realmv1.DriveLine) {
	for _, l := range lines {
		w := a.env.Stdout
		if l.GetStream() == realmv1.DriveStream_DRIVE_STREAM_STDERR {
			w = a.env.Stderr
		}
		fmt.Fprintln(w, l.GetText())
	}
}

func (a *app) agentRPCError(addr string, err error) error {
	if status.Code(err) == codes.Unavailable {
		return &exitError{code: ExitUnreachable, msg: fmt.Sprintf("Error: cannot reach agent-svc at %s: %s", addr, client.Cause(err))}
	}
	return refuse("Error: %s", client.Cause(err))
}
