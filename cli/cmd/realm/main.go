// Command realm is Realm's command-line tool, a client of engine-svc.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/realm-go/realm/cli/command"
)

func main() {
	if err := command.LoadDotEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "Error: reading .env: "+err.Error())
		os.Exit(command.ExitRefused)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := command.Run(ctx, os.Args[1:], command.Env{})
	stop()
	os.Exit(code)
}
